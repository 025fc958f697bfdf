"""``TFJobReconciler.UpdateJobStatus`` of training-operator release-1.9 (``pkg/controller.v1/tensorflow/
tfjob_controller.go``). Pure; events go to ``emit(type, reason, message)``.

What differs from the PyTorchJob's: with a Chief (or Master) the job succeeds when it does and runs while
it runs; without one the Workers decide, by the success policy: ``""`` (default) succeeds when Worker 0
exited 0, ``AllWorkers`` when every Worker succeeded. A failed replica fails the job (``has failed because
<n> <type> replica(s) failed``) unless the pod pass just marked the job Restarting (its restart policy
restarts it), or the Workers are dynamic. No replica status gets a ``selector`` (TFJob's never had one).
"""

from __future__ import annotations

from ...meta import rfc3339
from ..pytorchjob import conditions as cond
from ..pytorchjob import status as st
from ..pytorchjob.api import Obj, replicas_of
from .api import (
    CONTAINER_NAME,
    KIND,
    SUCCESS_POLICY_ALL_WORKERS,
    TENSORFLOW,
    WORKER,
    contains_chief_or_master,
    dynamic_workers,
    replica_specs,
    success_policy,
)


def worker0_completed(job: Obj, pods: list[Obj]) -> bool:
    """``IsWorker0Completed``: Worker 0's pod succeeded with exit code 0 (true when there are no Workers)."""
    specs = replica_specs(job)
    if WORKER not in specs:
        return True
    for index, bucket in enumerate(st.slices(pods, WORKER, replicas_of(specs[WORKER]))):
        if index == 0 and len(bucket) == 1:
            pod = bucket[0]
            code = st.exit_code(pod, CONTAINER_NAME)
            return code == 0 and st.phase(pod) == "Succeeded"
    return False


def _succeed(job: Obj, status: Obj, now: float, emit: st.Emit) -> None:
    meta = job["metadata"]
    message = f"{KIND} {meta['namespace']}/{meta['name']} successfully completed."
    emit("Normal", TENSORFLOW.reason("Succeeded"), message)
    st.mark_completed(status, now)
    cond.set_condition(status, cond.SUCCEEDED, "True", TENSORFLOW.reason("Succeeded"), message, now)


def _running(job: Obj, status: Obj, now: float) -> None:
    meta = job["metadata"]
    message = f"{KIND} {meta['namespace']}/{meta['name']} is running."
    cond.set_condition(status, cond.RUNNING, "True", TENSORFLOW.reason("Running"), message, now)


def update_job_status(job: Obj, status: Obj, now: float, emit: st.Emit, pods: list[Obj]) -> None:
    worker0 = worker0_completed(job, pods)
    status.setdefault("startTime", rfc3339(now))
    restarting = cond.find(status, cond.RESTARTING)
    existing = dict(restarting) if restarting is not None else None
    with_chief = contains_chief_or_master(job)
    meta = job["metadata"]
    for rtype, spec in replica_specs(job).items():
        rs = (status.get("replicaStatuses") or {}).get(rtype) or {}
        expected = replicas_of(spec) - st.counter(rs, "succeeded")
        running, failed = st.counter(rs, "active"), st.counter(rs, "failed")
        if with_chief:
            if rtype in ("Chief", "Master"):
                if running > 0:
                    _running(job, status, now)
                if expected == 0:
                    _succeed(job, status, now, emit)
        elif rtype == WORKER:
            all_workers = success_policy(job) == SUCCESS_POLICY_ALL_WORKERS
            if expected == 0 or (worker0 and not all_workers):
                _succeed(job, status, now, emit)
            elif running > 0:
                _running(job, status, now)
        if failed == 0:
            continue
        if existing is not None:
            why, message = str(existing.get("reason", "")), str(existing.get("message", ""))
            cond.set_condition(status, cond.RESTARTING, "True", why, message, now)
            continue
        if dynamic_workers(job) and rtype == WORKER:
            continue
        job_ref = f"{meta['namespace']}/{meta['name']}"
        message = f"{KIND} {job_ref} has failed because {failed} {rtype} replica(s) failed."
        emit("Normal", TENSORFLOW.reason("Failed"), message)
        st.mark_completed(status, now)
        cond.set_condition(status, cond.FAILED, "True", TENSORFLOW.reason("Failed"), message, now)


__all__ = ["update_job_status", "worker0_completed"]
