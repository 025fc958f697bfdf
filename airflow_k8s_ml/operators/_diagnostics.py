"""Why did it fail? Pod exit codes, log tails and Warning events, gathered once and worded for humans.

Why a module of its own: the failure message of a training task is what an on-call engineer reads at 3 a.m.
It should answer the usual questions without ``kubectl describe``: which pod (which replica, first) died,
with which exit code and last log line, what the scheduler or the image puller said. The interpretation is
pure (pod dicts -> :class:`PodFailure`, texts) and unit-tested; :func:`collect` is the one function that asks
the cluster, and it never raises (diagnostics must not hide the real error).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.kube.resources import REPLICA_TYPE_LABEL, replica_name
from airflow_k8s_ml.status import pod_problem, pods_problems, scheduling_message
from airflow_k8s_ml.status.pod import WAITING_PROBLEMS

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.sync_client import KubeClient

__all__ = [
    "Diagnostics",
    "PodFailure",
    "collect",
    "first_failure",
    "pod_failures",
    "replica_of",
]

_log = logging.getLogger(__name__)

#: At most this many pods get their logs fetched: a 64-worker job must not produce a 64-page task log.
MAX_PODS_WITH_LOGS = 8


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def replica_of(pod: Mapping[str, Any]) -> str | None:
    """``master-0`` / ``worker-1`` for PyTorchJob pods (training-operator labels), None otherwise."""
    labels = _meta(pod).get("labels") or {}
    return replica_name(pod) if labels.get(REPLICA_TYPE_LABEL) else None


@dataclass(frozen=True)
class PodFailure:
    """One pod that failed or is stuck: its exit (if it exited) or the reason it never ran."""

    pod: str
    container: str | None
    replica: str | None = None
    exit_code: int | None = None
    reason: str = ""
    finished_at: str = ""
    problem: str = ""

    def describe(self) -> str:
        """``pod ft-abc-x7k2p exited 3 (Error)`` or ``pod ft-abc-x7k2p: ImagePullBackOff: ...``."""
        who = f"{self.replica} (pod {self.pod})" if self.replica else f"pod {self.pod}"
        if self.exit_code is not None:
            return f"{who} exited {self.exit_code}" + (f" ({self.reason})" if self.reason else "")
        return f"{who}: {self.problem or self.reason or 'failed'}"


def _terminated(container: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The non-zero termination of a container: the current one, else the last (crash loops)."""
    for holder in ("state", "lastState"):
        terminated = (container.get(holder) or {}).get("terminated")
        if isinstance(terminated, Mapping) and terminated.get("exitCode") not in (0, None):
            return terminated
    return None


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    out: list[Mapping[str, Any]] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        out += [c for c in status.get(key) or [] if isinstance(c, Mapping)]
    return out


def _failure_of(pod: Mapping[str, Any]) -> PodFailure | None:
    name = str(_meta(pod).get("name", "?"))
    replica = replica_of(pod)
    for container in _container_statuses(pod):
        terminated = _terminated(container)
        if terminated is not None:
            return PodFailure(
                pod=name,
                container=container.get("name"),
                replica=replica,
                exit_code=int(terminated["exitCode"]),
                reason=str(terminated.get("reason") or ""),
                finished_at=str(terminated.get("finishedAt") or ""),
                problem=pod_problem(pod) or "",
            )
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in WAITING_PROBLEMS:
            problem = pod_problem(pod) or ""
            return PodFailure(name, container.get("name"), replica, None, waiting["reason"], "", problem)
    status = pod.get("status") or {}
    unschedulable = scheduling_message(pod)
    if status.get("phase") == "Failed" or unschedulable:
        reason = str(status.get("reason") or ("Unschedulable" if unschedulable else "Failed"))
        return PodFailure(name, None, replica, None, reason, "", pod_problem(pod) or unschedulable or "")
    return None


def pod_failures(pods: Iterable[Mapping[str, Any]]) -> list[PodFailure]:
    """Failed or stuck pods, earliest exit first (pods that never exited last, in the given order)."""
    failures = [f for f in map(_failure_of, pods) if f is not None]
    return sorted(failures, key=lambda f: (f.finished_at == "", f.finished_at))


def first_failure(failures: Sequence[PodFailure]) -> PodFailure | None:
    """The replica that died first: in a distributed run the others usually fail *because* of it (a rank
    that exits makes its peers time out), so it is the one whose log explains the failure."""
    exited = [f for f in failures if f.exit_code is not None and f.finished_at]
    return exited[0] if exited else (failures[0] if failures else None)


def _last_line(lines: Sequence[str]) -> str:
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


@dataclass(frozen=True)
class Diagnostics:
    """Everything gathered about a finished or stuck workload; ``report`` goes to the task log."""

    failures: list[PodFailure] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    log_tails: dict[str, list[str]] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)

    def headline(self) -> str:
        """The one clause for the exception message: the first failure and its last log line."""
        first = first_failure(self.failures)
        if first is None:
            return ""
        text = first.describe()
        if first.replica and len(self.failures) > 1:
            text = f"first failure: {text}"
        last = _last_line(self.log_tails.get(first.pod, []))
        if last:
            text += f": {last}"
        elif first.exit_code is None and first.problem and first.problem not in text:
            text += f": {first.problem}"
        return text

    def report(self) -> str:
        """Multi-line text for the task log (captured before anything is deleted)."""
        lines: list[str] = []
        for failure in self.failures:
            lines.append(f"  {failure.describe()}" + (f" - {failure.problem}" if failure.problem else ""))
        if self.problems:
            lines.append("pod problems:")
            lines += [f"  {p}" for p in self.problems]
        for pod, tail in self.log_tails.items():
            lines.append(f"last {len(tail)} log line(s) of pod {pod}:")
            lines += [f"  | {line}" for line in tail]
        if self.events:
            lines.append("Warning events:")
            lines += [f"  {e}" for e in self.events]
        return "\n".join(lines)


def _has_started(pod: Mapping[str, Any]) -> bool:
    for container in _container_statuses(pod):
        state = container.get("state") or {}
        if "running" in state or "terminated" in state or "terminated" in (container.get("lastState") or {}):
            return True
    return False


def _tail(
    client: KubeClient, pod: Mapping[str, Any], namespace: str, container: str | None, lines: int
) -> list[str]:
    try:
        text = client.pod_log_tail(str(_meta(pod).get("name")), namespace, container=container, lines=lines)
    except Exception as exc:  # a pod already gone, an API server that keeps failing
        return [f"(no logs: {exc})"]
    return str(text).splitlines()


def collect(client: KubeClient, obj: Mapping[str, Any], kind: str, lines: int = 50) -> Diagnostics:
    """Ask the cluster for pods, their log tails and Warning events. Never raises: a diagnostics failure is
    logged and yields what was gathered so far, because the caller is about to report a real error."""
    name = str(_meta(obj).get("name", ""))
    namespace = str(_meta(obj).get("namespace", ""))
    pods: list[Mapping[str, Any]] = []
    try:
        pods = list(client.pods_of(kind, name, namespace))
    except Exception as exc:
        _log.warning("could not list pods of %s %s/%s: %s", kind, namespace, name, exc)
    failures = pod_failures(pods)
    containers = {f.pod: f.container for f in failures}
    # Failed pods first (their logs explain the failure), then the others; pods that never started a
    # container have no logs to show.
    started = [pod for pod in pods if _has_started(pod)]
    started.sort(key=lambda pod: _meta(pod).get("name", "") not in containers)
    tails: dict[str, list[str]] = {}
    for pod in started[:MAX_PODS_WITH_LOGS]:
        pod_name = str(_meta(pod).get("name", "?"))
        tails[pod_name] = _tail(client, pod, namespace, containers.get(pod_name), lines)
    events: list[str] = []
    try:
        events = [str(line) for line in client.warning_events(obj)]
    except Exception as exc:
        _log.warning("could not list events of %s %s/%s: %s", kind, namespace, name, exc)
    return Diagnostics(failures, pods_problems(pods), tails, events)
