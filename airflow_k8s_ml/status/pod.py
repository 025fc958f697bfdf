"""Why is this pod not making progress? One-line diagnoses and the deadline phase a pod is in.

Used for phased deadlines (admission vs start-up vs run time) and for failure messages that answer the usual
questions without ``kubectl describe``: the scheduler's Unschedulable message, image pull errors, crash loops
and exit codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from airflow_k8s_ml.status._conditions import find, status_of

__all__ = [
    "WAITING_PROBLEMS",
    "PodPhaseKind",
    "owned_by",
    "pod_phase_kind",
    "pod_problem",
    "pods_phase_kind",
    "pods_problems",
    "scheduling_message",
]

PodPhaseKind = Literal["admission", "startup", "running", "done"]
_ORDER: tuple[PodPhaseKind, ...] = ("admission", "startup", "running", "done")

#: Container waiting reasons that mean "stuck", as opposed to ContainerCreating/PodInitializing.
WAITING_PROBLEMS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreStartHookError",
        "PostStartHookError",
    }
)


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = status_of(pod)
    out: list[Mapping[str, Any]] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        items = status.get(key)
        if isinstance(items, list):
            out += [item for item in items if isinstance(item, Mapping)]
    return out


def _terminated_text(terminated: Mapping[str, Any]) -> str:
    text = f"exit code {terminated.get('exitCode')}"
    if terminated.get("reason"):
        text += f" ({terminated['reason']})"
    if terminated.get("message"):
        text += f": {terminated['message']}"
    return text


def _container_problem(container: Mapping[str, Any]) -> str | None:
    name = container.get("name", "?")
    state = container.get("state") or {}
    waiting = state.get("waiting")
    if isinstance(waiting, Mapping) and waiting.get("reason") in WAITING_PROBLEMS:
        text = f"container {name}: {waiting['reason']}"
        if waiting.get("message"):
            text += f": {waiting['message']}"
        last = (container.get("lastState") or {}).get("terminated")
        if waiting["reason"] == "CrashLoopBackOff" and isinstance(last, Mapping):
            text += (
                f" (last termination: {_terminated_text(last)}; restarts: {container.get('restartCount', 0)})"
            )
        return text
    terminated = state.get("terminated")
    if isinstance(terminated, Mapping) and terminated.get("exitCode") not in (0, None):
        return f"container {name} terminated with {_terminated_text(terminated)}"
    return None


def pod_problem(pod: Mapping[str, Any]) -> str | None:
    """A human summary of what is wrong with the pod, or None if nothing is (yet).

    Covers: the pod itself failed (``Evicted``, ``DeadlineExceeded``), the scheduler could not place it
    (``PodScheduled=False``, e.g. ``0/1 nodes are available: 1 Insufficient nvidia.com/gpu.``), containers
    stuck waiting (image pulls, crash loops, bad config) and containers that exited non-zero.
    """
    status = status_of(pod)
    problems: list[str] = []
    if status.get("phase") == "Failed" and (status.get("reason") or status.get("message")):
        text = f"pod failed: {status.get('reason') or 'Failed'}"
        if status.get("message"):
            text += f": {status['message']}"
        problems.append(text)
    scheduled = find(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False" and scheduled.get("reason"):
        text = str(scheduled["reason"])
        if scheduled.get("message"):
            text += f": {scheduled['message']}"
        problems.append(text)
    problems += [p for p in map(_container_problem, _container_statuses(pod)) if p]
    return "; ".join(problems) or None


def scheduling_message(pod: Mapping[str, Any]) -> str | None:
    """The scheduler's own words when it cannot place the pod (``PodScheduled=False``), e.g.
    ``0/1 nodes are available: 1 Insufficient nvidia.com/gpu.``; None once scheduled or before it tried."""
    scheduled = find(pod, "PodScheduled")
    if scheduled is None or scheduled.get("status") != "False":
        return None
    return str(scheduled.get("message") or scheduled.get("reason") or "") or None


def pods_problems(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """``pod_problem`` of every pod that has one, prefixed by the pod name (``[pt-worker-1] ...``)."""
    out = []
    for pod in pods:
        problem = pod_problem(pod)
        if problem:
            out.append(f"[{(pod.get('metadata') or {}).get('name', '?')}] {problem}")
    return out


def pod_phase_kind(pod: Mapping[str, Any]) -> PodPhaseKind:
    """Which deadline budget the pod is spending.

    ``admission``: not placed on a node yet (waiting for the scheduler, Unschedulable, scheduling gates).
    ``startup``: placed but still Pending (pulling images, creating containers, init containers).
    ``running``: Running (or Unknown: it was running when its node stopped reporting).
    ``done``: Succeeded or Failed.
    """
    status = status_of(pod)
    phase = status.get("phase")
    if phase in ("Succeeded", "Failed"):
        return "done"
    if phase in ("Running", "Unknown"):
        return "running"
    scheduled = find(pod, "PodScheduled")
    node = (pod.get("spec") or {}).get("nodeName")
    if not node and (scheduled is None or scheduled.get("status") != "True"):
        return "admission"
    return "startup"


def pods_phase_kind(pods: Iterable[Mapping[str, Any]]) -> PodPhaseKind | None:
    """The least advanced phase among a workload's pods (a gang is only as far as its slowest member);
    ``done`` only if every pod is done; None without pods."""
    kinds = [pod_phase_kind(pod) for pod in pods]
    if not kinds:
        return None
    return min(kinds, key=_ORDER.index)


#: A JobSet's pods carry its name; their owner is a Job of the JobSet, not the workload (a TrainJob).
_JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    """The pod belongs to the workload instance ``uid``: a same-name predecessor's pods are not its own
    (no owner references, or no uid to compare, counts as ours).

    A JobSet's pod (a TrainJob's node) is owned by a Job two owners below the TrainJob, so its references
    cannot show the TrainJob's uid: it counts as ours. Same-name predecessors cannot arise there in practice:
    every attempt has its own name, and deleting a TrainJob deletes its JobSet's pods with it."""
    meta = pod.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    if _JOBSET_NAME_LABEL in (meta.get("labels") or {}):
        return True
    return not refs or not uid or any(ref.get("uid") == uid for ref in refs)
