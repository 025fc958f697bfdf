"""What a restarted cluster does with the pods that were running when its server stopped: what a kubelet
does after a node reboot.

The processes are gone (the server stopped them, or died with them), as a rebooted node's containers
are. The kubelet then reports each container that was running and that the runtime no longer has as
terminated with ``ContainerStatusUnknown`` / "The container could not be located when the pod was
terminated" / exit code 137, and counts one more restart (pkg/kubelet/kubelet_pods.go
convertToAPIContainerStatuses). The pod's restartPolicy decides what follows: ``Always`` and
``OnFailure`` pods get a new sandbox (new pod IP) and their containers start again, with that state as
``lastState`` (event ``SandboxChanged``); ``Never`` pods end ``Failed``, and their controllers (Job,
PyTorchJob) count the failure and replace them as they would any failed pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .kubelet.status import ContainerState, kubelet_conditions, merge_conditions, pod_phase
from .meta import parse_time
from .resources import lookup
from .store import Store

Obj = dict[str, Any]
Event = Callable[[Obj, str, str, str], None]  # (pod, type, reason, message)

LOST_REASON = "ContainerStatusUnknown"
LOST_MESSAGE = "The container could not be located when the pod was terminated"
LOST_EXIT_CODE = 137
SANDBOX_CHANGED = "Pod sandbox changed, it will be killed and re-created."
_TERMINAL = ("Succeeded", "Failed")


def states_from_status(pod: Obj) -> tuple[list[ContainerState], list[ContainerState]]:
    """(init, main) container states as the stored status describes them (the kubelet's memory of the
    pod, which a restarted kubelet reads back from the API as upstream's does)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return (
        _states(spec.get("initContainers") or [], status.get("initContainerStatuses") or []),
        _states(spec.get("containers") or [], status.get("containerStatuses") or []),
    )


def _states(containers: list[Obj], statuses: list[Obj]) -> list[ContainerState]:
    by_name = {s.get("name"): s for s in statuses}
    states = []
    for container in containers:
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        state = ContainerState(name, image)
        old = by_name.get(name)
        if old:
            current = old.get("state") or {}
            state.restart_count = int(old.get("restartCount") or 0)
            state.container_id = str(old.get("containerID") or "")
            state.image_id = str(old.get("imageID") or "")
            state.last_terminated = (old.get("lastState") or {}).get("terminated")
            if current.get("running") is not None:
                started = current["running"].get("startedAt")
                state.waiting, state.running_since = None, parse_time(started) if started else time.time()
            elif current.get("terminated") is not None:
                state.waiting, state.terminated = None, dict(current["terminated"])
            elif current.get("waiting") is not None:
                waiting = current["waiting"]
                state.waiting = (str(waiting.get("reason", "")), str(waiting.get("message", "")))
        states.append(state)
    return states


def resume_states(pod: Obj, init: list[ContainerState], main: list[ContainerState]) -> None:
    """Seed a new pod worker's states from the stored status (a pod adopted by a restarted kubelet):
    restart counts go on, and the last termination becomes ``lastState`` at the next start."""
    old_init, old_main = states_from_status(pod)
    for fresh, old in ((init, old_init), (main, old_main)):
        previous = {s.name: s for s in old}
        for state in fresh:
            before = previous.get(state.name)
            if before is None:
                continue
            state.restart_count = before.restart_count
            state.last_terminated = before.last_terminated
            if before.terminated is not None:
                state.terminated, state.waiting = before.terminated, None


def after_reboot(pod: Obj, now: float) -> Obj | None:
    """The status the kubelet reports for ``pod`` after the reboot, or None when nothing changes (it
    was not running, is terminal, or is being deleted: the kubelet then just confirms the deletion)."""
    status = pod.get("status") or {}
    if status.get("phase") in _TERMINAL or pod["metadata"].get("deletionTimestamp"):
        return None
    spec = pod.get("spec") or {}
    init, main = states_from_status(pod)
    lost = [s for s in (*init, *main) if s.running]
    if not lost:
        return None
    for state in lost:
        state.terminate(LOST_EXIT_CODE, LOST_REASON, now, LOST_MESSAGE)
        state.restart_count += 1
    phase = pod_phase(spec, init, main)
    new = dict(status)
    new["phase"] = phase
    fresh = kubelet_conditions(spec, init, main, phase, sandbox=False)
    new["conditions"] = merge_conditions(status.get("conditions") or [], fresh, now)
    if init:
        new["initContainerStatuses"] = [s.render() for s in init]
    new["containerStatuses"] = [s.render() for s in main]
    if phase in _TERMINAL:
        new.pop("podIP", None)
        new.pop("podIPs", None)
    return new


def reboot_node(store: Store, node_name: str, event: Event, now: float | None = None) -> int:
    """Apply :func:`after_reboot` to every pod bound to ``node_name``; returns how many changed."""
    pods = lookup("", "v1", "pods")
    assert pods is not None
    now = time.time() if now is None else now
    changed = 0
    for pod in list(store.iter(pods)):
        if (pod.get("spec") or {}).get("nodeName") != node_name:
            continue
        new_status = after_reboot(pod, now)
        if new_status is None:
            continue
        uid = pod["metadata"]["uid"]

        def apply(p: Obj, status: Obj = new_status, uid: str = uid) -> None:
            if p["metadata"].get("uid") == uid:
                p["status"] = status

        updated = store.mutate(pods, pod["metadata"].get("namespace", ""), pod["metadata"]["name"], apply)
        if updated is not None:
            changed += 1
            if new_status["phase"] not in _TERMINAL:
                event(updated, "Normal", "SandboxChanged", SANDBOX_CHANGED)
    return changed
