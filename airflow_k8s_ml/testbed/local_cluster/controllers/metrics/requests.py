"""Requests and errors per pod, as the service proxy saw them: counters since the pod was first reached and
a rate over a sliding window (what ``rate(http_requests_total[30s])`` gives a Prometheus adapter).

Pure given the time passed in: the proxy records, the custom metrics API reads. Memory is bounded: a pod
keeps one bucket per second of the window, not one entry per request.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

PodKey = tuple[str, str]  # (namespace, name)


@dataclass
class PodRequests:
    """One pod's counters. ``since`` is when the proxy first reached it: the rate of a pod that has been
    reached for less than the window is over the time it has been reached, not the whole window."""

    uid: str
    since: float
    total: int = 0
    errors: int = 0
    buckets: deque[tuple[int, int]] = field(default_factory=deque)  # (whole second, requests in it)

    def add(self, now: float, error: bool, window: float) -> None:
        self.total += 1
        self.errors += int(error)
        second = int(now)
        if self.buckets and self.buckets[-1][0] == second:
            self.buckets[-1] = (second, self.buckets[-1][1] + 1)
        else:
            self.buckets.append((second, 1))
        self._trim(now, window)

    def rate(self, now: float, window: float) -> float:
        """Requests per second over the last ``window`` seconds (or since first reached, if shorter)."""
        self._trim(now, window)
        covered = min(window, max(now - self.since, 1.0))
        return sum(count for _, count in self.buckets) / covered

    def _trim(self, now: float, window: float) -> None:
        while self.buckets and self.buckets[0][0] <= now - window - 1:
            self.buckets.popleft()


class RequestCounts:
    """Every pod's counters; a pod name taken by a new pod (another uid) starts from zero, as a new pod's
    own counters would."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._pods: dict[PodKey, PodRequests] = {}

    def record(self, pod: PodKey, uid: str, now: float, error: bool) -> None:
        counts = self._pods.get(pod)
        if counts is None or counts.uid != uid:
            counts = self._pods[pod] = PodRequests(uid, now)
        counts.add(now, error, self.window)

    def of(self, pod: PodKey, uid: str) -> PodRequests | None:
        counts = self._pods.get(pod)
        return counts if counts is not None and counts.uid == uid else None

    def forget(self, live: set[PodKey]) -> None:
        """Drop the counters of pods that no longer exist."""
        for key in [k for k in self._pods if k not in live]:
            del self._pods[key]
