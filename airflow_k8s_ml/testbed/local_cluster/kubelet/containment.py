"""Every process a container instance started ends with it, daemonized and ``setsid`` ones included.

On a node a container's processes live in its cgroup and PID namespace: when the main process exits, or
the pod is deleted, the runtime kills them all. A process group is not enough here, since ``setsid`` (or a
double fork) leaves it. Two mechanisms, chosen once per kubelet by :func:`detect`:

* ``cgroup``: where a cgroup v2 hierarchy is writable (root on most Linux machines; also the hybrid
  ``/sys/fs/cgroup/unified``), each instance gets its own cgroup, the child joins it before ``exec`` and
  everything it forks stays there; killing is ``cgroup.kill`` (or SIGKILL of every member, repeated).
* ``tree``: otherwise the kubelet becomes a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans
  of its pods are re-parented to it instead of PID 1, and an instance's processes are the kubelet's
  descendants whose environment carries the instance's marker (``LOCAL_CLUSTER_CONTAINER_ID``, inherited
  by everything the container starts). A process that clears its environment escapes this mode.

Killing reads ``/proc`` and may loop: callers run :meth:`Instance.kill` in a thread, never on the loop.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MARKER_ENV = "LOCAL_CLUSTER_CONTAINER_ID"
_PR_SET_CHILD_SUBREAPER = 36
_KILL_ROUNDS = 50  # a fork bomb could outpace one round of SIGKILLs; each round is ~10 ms apart


@dataclass
class Instance:
    """The processes of one container instance (whatever the mechanism)."""

    marker: str
    cgroup: Path | None = None
    main_pid: int = 0
    _fd: int | None = None
    _seen: set[int] = field(default_factory=set)  # members ever seen, to reap them (not the main process)

    # -- spawning ----------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        return {MARKER_ENV: self.marker}

    def preexec(self) -> Callable[[], None] | None:
        """Runs in the child between fork and exec: join the instance's cgroup (nothing to do otherwise).

        The fd was opened by the kubelet, so the write is checked against its credentials even after the
        child switched to ``runAsUser``."""
        if self.cgroup is None:
            return None
        fd = os.open(self.cgroup / "cgroup.procs", os.O_WRONLY)
        self._fd = fd

        def join() -> None:
            os.write(fd, b"0")

        return join

    def spawned(self, pid: int = 0) -> None:
        """The child exists (or failed to): the parent no longer needs the cgroup.procs fd."""
        self.main_pid = self.main_pid or pid
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- members -----------------------------------------------------------------------------------
    def pids(self) -> list[int]:
        """Live processes of this instance (zombies excluded)."""
        if self.cgroup is not None:
            try:
                text = (self.cgroup / "cgroup.procs").read_text()
            except OSError:
                return []
            listed = [int(p) for p in text.split() if p.strip()]
            self._seen.update(m for m in listed if m != self.main_pid)
            members = [pid for pid in listed if (_stat(pid) or ("Z", 0))[0] != "Z"]
        else:
            members = [pid for pid in _descendants(os.getpid()) if _has_marker(pid, self.marker)]
        self._seen.update(m for m in members if m != self.main_pid)
        return members

    def signal_all(self, sig: int) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def kill(self) -> None:
        """SIGKILL every process of the instance until none is left (blocking: call it in a thread)."""
        if self.cgroup is not None and (self.cgroup / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")
        for _ in range(_KILL_ROUNDS):
            members = self.pids()
            if not members:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        self._reap()

    def close(self) -> None:
        """Remove the instance's cgroup once it is empty (a populated cgroup cannot be removed)."""
        self.spawned()
        if self.cgroup is None:
            return
        for _ in range(100):
            try:
                self.cgroup.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
        log.warning("cgroup %s is still populated; left in place", self.cgroup)

    def _reap(self) -> None:
        """Orphans re-parented to the subreaper are its children: collect the ones that were members (the
        main process is the runtime's to reap, so its exit code is not lost)."""
        for _ in range(20):  # a process SIGKILLed a moment ago may not be a zombie yet
            for pid in list(self._seen):
                try:
                    done, _status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid  # not our child (its parent, or PID 1, reaps it)
                if done:
                    self._seen.discard(pid)
            if not self._seen:
                return
            time.sleep(0.01)


class Containment:
    """Creates :class:`Instance` objects of the chosen mechanism (see the module docstring)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root  # the kubelet's own cgroup directory, or None for the subreaper mode
        self.mode = "cgroup" if root is not None else "tree"

    def instance(self) -> Instance:
        marker = secrets.token_hex(16)
        if self.root is None:
            return Instance(marker)
        path = self.root / f"c-{marker}"
        try:
            path.mkdir()
        except OSError as exc:  # e.g. the cgroup limit of descendants: the marker still finds them
            log.warning("cannot create cgroup %s (%s); tracking by process tree", path, exc)
            return Instance(marker)
        return Instance(marker, path)

    def close(self) -> None:
        if self.root is not None:
            with contextlib.suppress(OSError):
                self.root.rmdir()


def detect(mode: str = "auto") -> Containment:
    """``auto``: a cgroup v2 directory of our own if one can be created, else the subreaper mode.
    ``tree`` forces the subreaper mode (tests cover both); ``cgroup`` is ``auto`` that warns on fallback."""
    if mode != "tree":
        root = _own_cgroup_dir()
        if root is not None:
            _become_subreaper()  # orphans still in a cgroup are killed by it; reaping them is ours
            return Containment(root)
        if mode == "cgroup":
            log.warning("no writable cgroup v2 hierarchy; falling back to process-tree tracking")
    _become_subreaper()
    return Containment(None)


def _own_cgroup_dir() -> Path | None:
    """A fresh directory under this process's cgroup v2 cgroup, if the hierarchy lets us create one."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    relative = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                relative = line[3:].strip().lstrip("/")
    base = mount / relative if relative else mount
    _sweep_orphaned(base)
    path = base / f"airflow-k8s-ml-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        path.mkdir()
    except OSError:
        return None
    if not (path / "cgroup.procs").exists():
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return path


def _sweep_orphaned(base: Path) -> None:
    """Cgroups of a kubelet that died without stopping its pods (``kill -9``): kill what is left in them
    and remove them, so a restart does not leave the old pods' processes running beside the new ones."""
    for stale in base.glob("airflow-k8s-ml-*-*"):
        pid = stale.name.split("-")[3]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        for child in [c for c in stale.iterdir() if c.is_dir()]:
            instance = Instance("", child)
            instance.kill()
            instance.close()
        with contextlib.suppress(OSError):
            stale.rmdir()


def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            return Path(parts[1])
    return None


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _descendants(root: int) -> Iterator[int]:
    """Every live process whose parent chain leads to ``root`` (from one read of ``/proc``)."""
    parents: dict[int, int] = {}
    for entry in _proc_entries():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None and stat[0] != "Z":
            parents[int(entry.name)] = stat[1]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        yield pid
        stack.extend(children.get(pid, []))


def _proc_entries() -> list[os.DirEntry[str]]:
    """``/proc``'s entries (none where there is no procfs: nothing can be tracked there)."""
    try:
        return list(os.scandir("/proc"))
    except OSError:
        return []


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) from ``/proc/PID/stat`` (the command name may contain spaces and parentheses)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return (fields[0], int(fields[1])) if len(fields) > 1 else None


def _has_marker(pid: int, marker: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0")
