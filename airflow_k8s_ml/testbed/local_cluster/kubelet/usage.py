"""What each container uses, read from its cgroup: CPU (``cpu.stat`` ``usage_usec``) and memory (the
working set: ``memory.current`` less ``inactive_file`` where the memory controller is enabled, else the
resident memory of the cgroup's processes, since a hybrid hierarchy binds memory to cgroup v1).

As the kubelet's summary API feeds metrics-server: a sample per container every ``resolution`` seconds,
CPU as the rate between the two newest samples (cores), memory as the newest reading. A container without
a cgroup (the kubelet is not root, or cgroup v2 is not writable) is not measured: its pod gets a Warning
event saying so, and the metrics API has no figures for it.

Reading cgroup files blocks: :meth:`UsageMeter.sample` runs in a thread, never on the loop.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .containment import Instance

NO_CGROUP_REASON = "MetricsUnavailable"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def no_cgroup_message(container: str) -> str:
    return (
        f'container "{container}" has no cgroup, so its CPU and memory are not measured (the local cluster '
        "needs root and a writable cgroup v2 hierarchy): metrics.k8s.io has no figures for this pod, and "
        'an HPA on cpu or memory uses the values set by the admin action "metrics", if any'
    )


@dataclass(frozen=True)
class Reading:
    at: float
    cpu_usec: int
    memory: int


@dataclass(frozen=True)
class ContainerUsage:
    name: str
    cores: float
    memory: int


@dataclass(frozen=True)
class PodUsage:
    """One pod's figures: ``at`` the newest sample, ``window`` the seconds the CPU rate spans."""

    at: float
    window: float
    containers: tuple[ContainerUsage, ...]


@dataclass
class _Tracked:
    instance: Instance
    readings: deque[Reading] = field(default_factory=lambda: deque(maxlen=2))


def read_cgroup(path: Path, at: float) -> Reading | None:
    """One reading of a container's cgroup, or None once it is gone."""
    try:
        cpu = _stat_value((path / "cpu.stat").read_text(), "usage_usec")
    except OSError:
        return None
    return Reading(at, cpu, _working_set(path))


def _stat_value(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def _working_set(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        current = int((path / "memory.current").read_text())
        inactive = _stat_value((path / "memory.stat").read_text(), "inactive_file")
        return max(current - inactive, 0)
    total = 0
    with contextlib.suppress(OSError):
        for procs in [path / "cgroup.procs", *path.glob("*/cgroup.procs")]:  # the node's: its pods'
            for pid in procs.read_text().split():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    return total


class UsageMeter:
    """The node's containers with a cgroup, keyed by (pod uid, container name)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root  # the cgroup holding every container's: the node's figures
        self._node: deque[Reading] = deque(maxlen=2)
        self._tracked: dict[tuple[str, str], _Tracked] = {}
        self._lock = threading.Lock()  # sample() runs in a thread while the loop tracks and reads

    def track(self, uid: str, container: str, instance: Instance) -> bool:
        """Measure this container instance from now on; False when it has no cgroup to read."""
        if instance.cgroup is None:
            return False
        with self._lock:
            self._tracked[(uid, container)] = _Tracked(instance)
        return True

    def untrack(self, uid: str, container: str, instance: Instance) -> None:
        with self._lock:
            tracked = self._tracked.get((uid, container))
            if tracked is not None and tracked.instance is instance:
                del self._tracked[(uid, container)]

    def sample(self, at: float) -> None:
        """Read every tracked cgroup once (blocking: call it in a thread)."""
        with self._lock:
            items = list(self._tracked.values())
        node = read_cgroup(self.root, at) if self.root is not None else None
        if node is not None:
            with self._lock:
                self._node.append(node)
        for tracked in items:
            cgroup = tracked.instance.cgroup
            reading = read_cgroup(cgroup, at) if cgroup is not None else None
            if reading is not None:
                with self._lock:
                    tracked.readings.append(reading)

    def pod(self, uid: str) -> PodUsage | None:
        """The pod's figures, once each of its measured containers has two samples (a rate needs two)."""
        with self._lock:
            found = [(c, list(t.readings)) for (u, c), t in self._tracked.items() if u == uid]
        measured = [(c, r) for c, r in found if len(r) == 2]
        if not found or len(measured) < len(found):
            return None
        containers = tuple(_usage(c, old, new) for c, (old, new) in sorted(measured, key=lambda m: m[0]))
        newest = max(r[1].at for _, r in measured)
        window = max(r[1].at - r[0].at for _, r in measured)
        return PodUsage(newest, window, containers)

    def node(self) -> PodUsage | None:
        """What the node's pods use together, from the cgroup above all of theirs (cgroup v2 counts a
        cgroup's descendants in its own ``cpu.stat``); our node runs nothing else."""
        with self._lock:
            readings = list(self._node)
        if len(readings) < 2:
            return None
        old, new = readings
        return PodUsage(new.at, new.at - old.at, (_usage("", old, new),))


def _usage(name: str, old: Reading, new: Reading) -> ContainerUsage:
    cores = max(new.cpu_usec - old.cpu_usec, 0) / 1e6 / max(new.at - old.at, 1e-3)
    return ContainerUsage(name, cores, new.memory)
