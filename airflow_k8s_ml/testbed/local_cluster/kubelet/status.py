"""Pod status as the kubelet computes it: container states, the phase, and the four kubelet conditions.

Pure: the worker keeps a :class:`ContainerState` per container and calls :func:`pod_status` to render
the whole status, so the rules (pkg/kubelet/kubelet_pods.go getPhase, pkg/kubelet/status/generate.go)
live in one place and can be unit-tested. Condition lastTransitionTime only moves when status changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..meta import rfc3339

Obj = dict[str, Any]
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
CONDITION_ORDER = (*KUBELET_CONDITIONS, "PodScheduled")


@dataclass
class ContainerState:
    """One container's current instance, in the shape of a v1.ContainerStatus."""

    name: str
    image: str
    image_id: str = ""
    waiting: tuple[str, str] | None = ("ContainerCreating", "")
    running_since: float | None = None
    terminated: Obj | None = None
    last_terminated: Obj | None = None
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    container_id: str = ""
    instances: int = field(default=0, repr=False)

    def wait(self, reason: str, message: str = "") -> None:
        if self.terminated is not None:
            self.last_terminated, self.terminated = self.terminated, None
        self.waiting, self.running_since, self.ready, self.started = (reason, message), None, False, False

    def begin_instance(self, container_id: str, image_id: str) -> None:
        """A new container instance exists (started or not): every instance after the first is a restart."""
        if self.instances > 0:
            self.restart_count += 1
        self.instances += 1
        self.container_id, self.image_id = container_id, image_id

    def run(self, now: float) -> None:
        if self.terminated is not None:
            self.last_terminated = self.terminated
        self.waiting, self.terminated, self.running_since = None, None, now

    def terminate(
        self, exit_code: int, reason: str, now: float, message: str = "", container_id: str | None = None
    ) -> None:
        started = self.running_since if self.running_since is not None else now
        terminated: Obj = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": rfc3339(started),
            "finishedAt": rfc3339(now),
            "containerID": container_id if container_id is not None else self.container_id,
        }
        if message:
            terminated["message"] = message
        if self.terminated is not None:
            self.last_terminated = self.terminated
        self.terminated, self.waiting, self.running_since, self.ready, self.started = (
            terminated,
            None,
            None,
            False,
            False,
        )

    @property
    def running(self) -> bool:
        return self.running_since is not None

    def render(self) -> Obj:
        if self.running_since is not None:
            state: Obj = {"running": {"startedAt": rfc3339(self.running_since)}}
        elif self.terminated is not None:
            state = {"terminated": dict(self.terminated)}
        else:
            reason, message = self.waiting or ("ContainerCreating", "")
            state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        status: Obj = {
            "name": self.name,
            "state": state,
            "lastState": {"terminated": dict(self.last_terminated)} if self.last_terminated else {},
            "ready": self.ready,
            "restartCount": self.restart_count,
            "image": self.image,
            "imageID": self.image_id,
            "started": self.started,
        }
        if self.container_id:
            status["containerID"] = self.container_id
        return status


def _init_counts(spec: Obj, init: list[ContainerState]) -> tuple[int, int, int]:
    """(pending regular, pending restartable (sidecars), failed) init containers, as getPhase counts them."""
    pending = pending_sidecars = failed = 0
    by_name = {s.name: s for s in init}
    for container in spec.get("initContainers") or []:
        state = by_name.get(container.get("name", ""))
        if container.get("restartPolicy") == "Always":
            pending_sidecars += state is None or not (state.running and state.started)
            continue
        if state is None or state.running:
            pending += 1
        elif state.terminated is not None:
            failed += state.terminated["exitCode"] != 0
        elif state.last_terminated is not None:
            failed += state.last_terminated["exitCode"] != 0
        else:
            pending += 1
    return pending, pending_sidecars, failed


def pod_phase(
    spec: Obj, init: list[ContainerState], main: list[ContainerState], terminal: bool = False
) -> str:
    """getPhase: ``terminal`` means the kubelet has stopped the pod for good (deleted, evicted)."""
    policy = spec.get("restartPolicy") or "Always"
    pending_init, pending_sidecars, failed_init = _init_counts(spec, init)
    by_name = {s.name: s for s in main}
    unknown = running = waiting = stopped = succeeded = 0
    for container in spec.get("containers") or []:
        state = by_name.get(container.get("name", ""))
        if state is None:
            unknown += 1
        elif state.running:
            running += 1
        elif state.terminated is not None:
            stopped += 1
            succeeded += state.terminated["exitCode"] == 0
        elif state.last_terminated is not None:
            stopped += 1
        else:
            waiting += 1
    if failed_init and policy == "Never":
        return "Failed"
    if pending_init or waiting or (pending_sidecars and not running and not stopped):
        return "Failed" if terminal else "Pending"
    if running and not unknown:
        return "Running"
    if not running and stopped and not unknown:
        if policy == "Always" and not terminal:
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if policy == "Never" or terminal:
            return "Failed"
        return "Running"
    return "Pending"


def _names(items: list[str]) -> str:
    return "[" + " ".join(items) + "]"


def kubelet_conditions(
    spec: Obj, init: list[ContainerState], main: list[ContainerState], phase: str, sandbox: bool
) -> list[Obj]:
    """(type, status, reason, message) dicts for the four kubelet-owned conditions, upstream order."""
    incomplete = [
        s.name
        for s in init
        if not (
            (s.terminated is not None and s.terminated["exitCode"] == 0)
            or (s.started and _restartable(spec, s.name))
        )
    ]
    initialized: Obj = {"type": "Initialized", "status": "True"}
    if incomplete and phase not in ("Succeeded",):
        initialized = {
            "type": "Initialized",
            "status": "False",
            "reason": "ContainersNotInitialized",
            "message": f"containers with incomplete status: {_names(incomplete)}",
        }
    ready = _ready_condition(main, phase)
    return [
        {"type": "PodReadyToStartContainers", "status": "True" if sandbox else "False"},
        initialized,
        {**ready, "type": "Ready"},
        {**ready, "type": "ContainersReady"},
    ]


def _restartable(spec: Obj, name: str) -> bool:
    return any(
        c.get("name") == name and c.get("restartPolicy") == "Always" for c in spec.get("initContainers") or []
    )


def _ready_condition(main: list[ContainerState], phase: str) -> Obj:
    if phase == "Succeeded":
        return {"status": "False", "reason": "PodCompleted"}
    if phase == "Failed":
        return {"status": "False", "reason": "PodFailed"}
    unready = [s.name for s in main if not s.ready]
    if unready:
        return {
            "status": "False",
            "reason": "ContainersNotReady",
            "message": f"containers with unready status: {_names(unready)}",
        }
    return {"status": "True"}


def merge_conditions(existing: list[Obj], fresh: list[Obj], now: float) -> list[Obj]:
    """Replace kubelet-owned conditions, keep others (PodScheduled, DisruptionTarget, readiness gates),
    and keep lastTransitionTime when a condition's status did not change."""
    old = {c.get("type"): c for c in existing}
    merged = []
    for condition in fresh:
        previous = old.get(condition["type"])
        if previous is None or previous.get("status") != condition["status"]:
            since = rfc3339(now)
        else:
            since = previous.get("lastTransitionTime") or rfc3339(now)
        merged.append({**condition, "lastProbeTime": None, "lastTransitionTime": since})
    owned = {c["type"] for c in fresh}
    merged.extend(c for c in existing if c.get("type") not in owned)
    rank = {t: i for i, t in enumerate(CONDITION_ORDER)}
    return sorted(merged, key=lambda c: rank.get(c.get("type", ""), len(rank)))


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String for the back-off message: 10s, 1m20s, 5m0s, 200ms."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    total = round(seconds, 3)
    minutes, rest = divmod(total, 60)
    hours, minutes = divmod(int(minutes), 60)
    secs = f"{rest:g}s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    if minutes:
        return f"{minutes}m{secs}"
    return secs


def pod_ref(pod: Obj) -> str:
    """format.Pod: ``name_namespace(uid)``, as in kubelet messages."""
    meta = pod["metadata"]
    return f"{meta['name']}_{meta.get('namespace', '')}({meta.get('uid', '')})"
