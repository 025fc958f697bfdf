"""Reading pods into a PyTorchJob's status, and the status rules of the training operator (release-1.9).

Pure functions: ``update_job_status`` is ``PyTorchJobReconciler.UpdateJobStatus``; the backoff and deadline
checks are ``core.PastBackoffLimit`` / ``core.PastActiveDeadline``; ``abnormal_pod_events`` is
``core.RecordAbnormalPods``. Events go to an ``emit(type, reason, message)`` callback so the rules stay
testable without a cluster. Replica statuses are kept as dicts with zero counters dropped, which is how
the Go struct (``omitempty``) serializes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...meta import parse_time, rfc3339
from . import conditions as cond
from .api import (
    CONTAINER_NAME,
    MASTER,
    PYTORCH,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    WORKER,
    Framework,
    Obj,
    replica_specs,
    replicas_of,
    run_policy,
    selector_string,
)

Emit = Callable[[str, str, str], None]
RETRYABLE_EXIT_CODE = 128  # ExitCode policy: 128-255 (signals) are retried, 1-127 are permanent
NO_EXIT_CODE = 0xBEEF  # upstream's "no terminated container" marker (it is >= 128, so retryable)
_COUNTERS = ("active", "succeeded", "failed")


# -- pods --------------------------------------------------------------------------------------------
def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def active_pods(pods: Iterable[Obj]) -> list[Obj]:
    """``FilterActivePods``: neither finished nor being deleted."""
    return [p for p in pods if phase(p) not in ("Succeeded", "Failed") and not is_terminating(p)]


def replica_type_of(obj: Obj) -> str:
    return str((obj["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL, ""))


def replica_index_of(obj: Obj) -> int | None:
    raw = (obj["metadata"].get("labels") or {}).get(REPLICA_INDEX_LABEL)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def slices(objects: Iterable[Obj], rtype: str, replicas: int) -> list[list[Obj]]:
    """``GetPodSlices``: objects of ``rtype`` by replica index; as many slots as the larger of the highest
    index + 1 and ``replicas``."""
    typed = [(replica_index_of(o), o) for o in objects if replica_type_of(o) == rtype.lower()]
    indexed = [(i, o) for i, o in typed if i is not None and i >= 0]
    size = max([replicas, *(i + 1 for i, _ in indexed)])
    buckets: list[list[Obj]] = [[] for _ in range(size)]
    for index, obj in indexed:
        buckets[index].append(obj)
    return buckets


def exit_code(pod: Obj, container: str = CONTAINER_NAME) -> int | None:
    """The default container's exit code when it is terminated (None while it is not)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if status.get("name") == container and terminated is not None:
            return int(terminated.get("exitCode", 0))
    return None


def count_pod(replica_status: Obj, pod: Obj) -> None:
    """``UpdateJobReplicaStatuses``: Running counts active (failed when being deleted); Pending nothing."""
    key = {
        "Running": "failed" if is_terminating(pod) else "active",
        "Succeeded": "succeeded",
        "Failed": "failed",
    }.get(phase(pod))
    if key is not None:
        replica_status[key] = replica_status.get(key, 0) + 1


def counter(replica_status: Obj | None, key: str) -> int:
    return int((replica_status or {}).get(key) or 0)


# -- status shape ------------------------------------------------------------------------------------
def normalized(status: Obj | None) -> Obj:
    """The status as the Go types serialize it: field order, zero counters dropped, map keys sorted."""
    status = status or {}
    replica_statuses = {
        rtype: {k: v for k, v in (rs or {}).items() if v or k not in _COUNTERS}
        for rtype, rs in sorted((status.get("replicaStatuses") or {}).items())
    }
    result: Obj = {"conditions": list(status.get("conditions") or []), "replicaStatuses": replica_statuses}
    for key in ("startTime", "completionTime", "lastReconcileTime"):
        if status.get(key):
            result[key] = status[key]
    return result


def mark_completed(status: Obj, now: float) -> None:
    status.setdefault("completionTime", rfc3339(now))


# -- limits ------------------------------------------------------------------------------------------
def past_active_deadline(job: Obj, status: Obj, now: float) -> bool:
    deadline = run_policy(job).get("activeDeadlineSeconds")
    if deadline is None or not status.get("startTime"):
        return False
    return now - parse_time(status["startTime"]) >= float(deadline)


def past_backoff_limit(job: Obj, pods: list[Obj], fw: Framework = PYTORCH) -> bool:
    """Sum of container restarts of *running* pods of restarting replica types reaches ``backoffLimit``."""
    limit = run_policy(job).get("backoffLimit")
    if limit is None:
        return False
    restarts = 0
    for rtype, spec in fw.replica_specs(job).items():
        if spec.get("restartPolicy") not in ("OnFailure", "Always", "ExitCode"):
            continue
        for pod in pods:
            if replica_type_of(pod) != rtype.lower() or phase(pod) != "Running":
                continue
            status = pod.get("status") or {}
            statuses = [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]
            restarts += sum(int(s.get("restartCount") or 0) for s in statuses)
    return restarts > 0 if int(limit) == 0 else restarts >= int(limit)


def exceeds_backoff_limit(job: Obj, status: Obj, pods: list[Obj], total: int) -> bool:
    """A new failed pod while not all replicas are active, with ``NumRequeues`` (always 0 for PyTorchJob's
    fake work queue) + 1 above ``backoffLimit``: in effect only ``backoffLimit: 0`` fails here."""
    limit = run_policy(job).get("backoffLimit")
    if limit is None:
        return False
    failed = sum(1 for p in pods if phase(p) == "Failed")
    previous = sum(counter(rs, "failed") for rs in (status.get("replicaStatuses") or {}).values())
    return failed > previous and len(active_pods(pods)) != total and int(limit) < 1


def limit_failure(
    job: Obj, status: Obj, pods: list[Obj], total: int, now: float, fw: Framework = PYTORCH
) -> str | None:
    """The failure message when the backoff limit or the active deadline is hit (checked in that order)."""
    name = job["metadata"]["name"]
    if exceeds_backoff_limit(job, status, pods, total) or past_backoff_limit(job, pods, fw):
        return f"Job {name} has failed because it has reached the specified backoff limit"
    if past_active_deadline(job, status, now):
        return f"Job {name} has failed because it was active longer than specified deadline"
    return None


# -- events about unhealthy pods ---------------------------------------------------------------------
def _container_events(pod_name: str, statuses: list[Obj]) -> list[tuple[str, str]]:
    found = []
    for status in statuses:
        state = status.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) != 0:
            found.append(
                (
                    terminated.get("reason", ""),
                    f"Error pod {pod_name} container {status.get('name')} exitCode: "
                    f"{terminated['exitCode']} terminated message: {terminated.get('message', '')}",
                )
            )
        if waiting is not None and waiting.get("message"):
            found.append(
                (
                    waiting.get("reason", ""),
                    f"Error pod {pod_name} container {status.get('name')} waiting message: "
                    f"{waiting['message']}",
                )
            )
    return found


def abnormal_pod_events(active: list[Obj]) -> list[tuple[str, str]]:
    """``RecordAbnormalPods``: (reason, message) Warnings for failing containers or a False condition."""
    found: list[tuple[str, str]] = []
    for pod in active:
        status, name = pod.get("status") or {}, pod["metadata"]["name"]
        statuses = status.get("containerStatuses") or status.get("initContainerStatuses") or []
        if statuses:
            found += _container_events(name, statuses)
            continue
        conditions = sorted(
            status.get("conditions") or [], key=lambda c: c.get("lastTransitionTime") or "", reverse=True
        )
        if conditions and conditions[0].get("status") != "True":
            latest = conditions[0]
            found.append(
                (latest.get("reason", ""), f"Error pod {name} condition message: {latest.get('message', '')}")
            )
    return found


# -- UpdateJobStatus ---------------------------------------------------------------------------------
def _with_master(job: Obj, status: Obj, rtype: str, rs: Obj, now: float, emit: Emit) -> bool:
    """Master rules; True when the job just succeeded (the remaining replica types are not looked at)."""
    if rtype != MASTER:
        return False
    name = job["metadata"]["name"]
    if counter(rs, "active") > 0:
        cond.set_condition(
            status, cond.RUNNING, "True", cond.reason("Running"), f"PyTorchJob {name} is running.", now
        )
    if replicas_of(replica_specs(job)[MASTER]) - counter(rs, "succeeded") == 0:
        message = f"PyTorchJob {name} is successfully completed."
        emit("Normal", cond.reason("Succeeded"), message)
        mark_completed(status, now)
        cond.set_condition(status, cond.SUCCEEDED, "True", cond.reason("Succeeded"), message, now)
        return True
    return False


def _without_master(job: Obj, status: Obj, rtype: str, rs: Obj, now: float, emit: Emit) -> None:
    if rtype != WORKER:
        return
    meta = job["metadata"]
    elastic = (job.get("spec") or {}).get("elasticPolicy") is not None
    succeeded = counter(rs, "succeeded")
    if replicas_of(replica_specs(job)[WORKER]) - succeeded == 0 or (elastic and succeeded > 0):
        message = f"PyTorchJob {meta['namespace']}/{meta['name']} successfully completed."
        emit("Normal", cond.reason("Succeeded"), message)
        mark_completed(status, now)
        cond.set_condition(status, cond.SUCCEEDED, "True", cond.reason("Succeeded"), message, now)
    elif counter(rs, "active") > 0:
        message = f"PyTorchJob {meta['namespace']}/{meta['name']} is running."
        cond.set_condition(status, cond.RUNNING, "True", cond.reason("Running"), message, now)


def _failures(job: Obj, status: Obj, rtype: str, rs: Obj, now: float, emit: Emit) -> None:
    spec = replica_specs(job)[rtype]
    failed = counter(rs, "failed")
    if failed == 0 or replicas_of(spec) <= counter(rs, "succeeded") + counter(rs, "active"):
        return
    name = job["metadata"]["name"]
    if spec.get("restartPolicy") != "Never":
        message = f"PyTorchJob {name} is restarting because {failed} {rtype} replica(s) failed."
        emit("Warning", cond.reason("Restarting"), message)
        cond.set_condition(status, cond.RESTARTING, "True", cond.reason("Restarting"), message, now)
    else:
        message = f"PyTorchJob {name} is failed because {failed} {rtype} replica(s) failed."
        emit("Normal", cond.reason("Failed"), message)
        mark_completed(status, now)
        cond.set_condition(status, cond.FAILED, "True", cond.reason("Failed"), message, now)


def update_job_status(job: Obj, status: Obj, now: float, emit: Emit, pods: list[Obj] | None = None) -> None:
    """``UpdateJobStatus``: start time, selectors, Running/Succeeded from the Master (or the Workers when
    there is no Master), Restarting/Failed from failed replicas."""
    status.setdefault("startTime", rfc3339(now))
    specs = replica_specs(job)
    replica_statuses = status.setdefault("replicaStatuses", {})
    for rtype in specs:  # every type gets its selector, even past an early return (Go: map order decides)
        replica_statuses.setdefault(rtype, {})["selector"] = selector_string(job["metadata"]["name"], rtype)
    for rtype in specs:
        rs = replica_statuses[rtype]
        if MASTER in specs:
            if _with_master(job, status, rtype, rs, now, emit):
                return
        else:
            _without_master(job, status, rtype, rs, now, emit)
        _failures(job, status, rtype, rs, now, emit)


__all__ = [
    "NO_EXIT_CODE",
    "RETRYABLE_EXIT_CODE",
    "abnormal_pod_events",
    "active_pods",
    "count_pod",
    "exit_code",
    "limit_failure",
    "normalized",
    "slices",
    "update_job_status",
]
