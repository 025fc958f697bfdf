"""One reconcile of a PyTorchJob: ``JobController.ReconcileJobs`` of the training operator (release-1.9).

The order is upstream's: finished jobs only clean up (cleanPodPolicy, TTL); suspended jobs lose their pods
and services; then the backoff limit and the active deadline may fail the job (deleting every pod and
Service); otherwise each replica type gets its pods and Services reconciled and ``UpdateJobStatus`` derives
the conditions. All I/O goes through :class:`Ops` (the controller), so this module only decides.

One addition for the local cluster: the Master pod is created with a pod IP reserved in advance, and
Workers are created only once a live Master exists, so ``MASTER_ADDR`` always names where the Master
process listens (upstream uses the Master Service's DNS name and an init container that waits for it).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Protocol

from ...meta import new_uid, parse_time, rfc3339
from . import conditions as cond
from . import status as st
from .api import (
    CLEAN_POD_POLICY_NONE,
    MASTER,
    Obj,
    is_suspended,
    managed_here,
    replica_name,
    replica_specs,
    replicas_of,
    run_policy,
    total_replicas,
)
from .pods import build_pod, build_service, env_value, template_sets_restart_policy


class Ops(Protocol):
    """What a reconcile needs from the cluster (implemented by the controller)."""

    def now(self) -> float: ...
    def pods_of(self, job: Obj) -> list[Obj]: ...
    def services_of(self, job: Obj) -> list[Obj]: ...
    def create_pod(self, job: Obj, pod: Obj) -> bool: ...
    def delete_pod(self, job: Obj, pod: Obj) -> None: ...
    def create_service(self, job: Obj, service: Obj) -> bool: ...
    def delete_service(self, job: Obj, namespace: str, name: str) -> None: ...
    def reserve_pod_ip(self, pod_uid: str, host_network: bool) -> str | None: ...
    def release_pod_ip(self, pod_uid: str) -> None: ...
    def event(self, job: Obj, type_: str, reason: str, message: str) -> None: ...
    def write_status(self, job: Obj, status: Obj) -> None: ...
    def delete_job(self, job: Obj) -> None: ...


@dataclass
class Pass:
    """State of one reconcile: the job, its status being computed, and where the Master listens."""

    ops: Ops
    job: Obj
    status: Obj
    now: float
    master_addr: str | None = None

    def emit(self, type_: str, reason: str, message: str) -> None:
        self.ops.event(self.job, type_, reason, message)

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])


def sync_pytorchjob(ops: Ops, job: Obj) -> None:
    if job["metadata"].get("deletionTimestamp") or not managed_here(job):
        return
    old = st.normalized(job.get("status"))
    run = Pass(ops, job, copy.deepcopy(old), ops.now())
    cond.set_condition(
        run.status,
        cond.CREATED,
        "True",
        cond.reason("Created"),
        f"PyTorchJob {run.name} is created.",
        run.now,
    )
    pods = ops.pods_of(job)
    if cond.is_finished(run.status):
        _finished(run, pods)
    elif is_suspended(job):
        _suspended(run, pods)
    else:
        _active(run, pods)
    new = st.normalized(run.status)
    if new != old:
        ops.write_status(job, new)


# -- the three paths ---------------------------------------------------------------------------------
def _finished(run: Pass, pods: list[Obj]) -> None:
    _cleanup_resources(run, pods)
    if cond.is_true(run.status, cond.SUCCEEDED):
        for rs in (run.status.get("replicaStatuses") or {}).values():
            rs["succeeded"] = st.counter(rs, "succeeded") + st.counter(rs, "active")
            rs["active"] = 0


def _suspended(run: Pass, pods: list[Obj]) -> None:
    _cleanup_resources(run, pods)
    for rs in (run.status.get("replicaStatuses") or {}).values():
        rs["active"] = 0
    message = f"PyTorchJob {run.name} is suspended."
    why = cond.reason("Suspended")
    if cond.is_true(run.status, cond.RUNNING):
        cond.set_condition(run.status, cond.RUNNING, "False", why, message, run.now)
    if not cond.is_true(run.status, cond.SUSPENDED):
        cond.set_condition(run.status, cond.SUSPENDED, "True", why, message, run.now)
    run.emit("Normal", why, message)


def _active(run: Pass, pods: list[Obj]) -> None:
    if cond.is_true(run.status, cond.SUSPENDED):
        message = f"PyTorchJob {run.name} is resumed."
        cond.set_condition(run.status, cond.SUSPENDED, "False", cond.reason(cond.RESUMED), message, run.now)
        run.status["startTime"] = rfc3339(run.now)
        run.emit("Normal", cond.reason(cond.RESUMED), message)
    for reason, message in st.abnormal_pod_events(st.active_pods(pods)):
        run.emit("Warning", reason, message)
    failure = st.limit_failure(run.job, run.status, pods, total_replicas(run.job), run.now)
    if failure is not None:
        _fail(run, pods, failure)
        return
    run.master_addr = _live_master_addr(pods)
    services = run.ops.services_of(run.job)
    for rtype, spec in replica_specs(run.job).items():
        _reconcile_pods(run, pods, rtype, spec)
        _reconcile_services(run, services, rtype, spec)
    st.update_job_status(run.job, run.status, run.now, run.emit)


def _fail(run: Pass, pods: list[Obj], message: str) -> None:
    """Backoff limit or deadline: completion time, every pod and Service deleted, then Failed."""
    st.mark_completed(run.status, run.now)
    _delete_pods_and_services(run, pods)
    _cleanup_job(run)
    run.emit("Normal", cond.reason("Failed"), message)
    cond.set_condition(run.status, cond.FAILED, "True", cond.reason("Failed"), message, run.now)


# -- pods ----------------------------------------------------------------------------------------------
def _live_master_addr(pods: list[Obj]) -> str | None:
    """MASTER_ADDR of the current Master pod, if it is alive (workers must not get a dead address)."""
    for pod in pods:
        if (
            st.replica_type_of(pod) == MASTER.lower()
            and not st.is_terminating(pod)
            and st.phase(pod) not in ("Failed", "Succeeded")
        ):
            return env_value(pod, "MASTER_ADDR")
    return None


def _reconcile_pods(run: Pass, pods: list[Obj], rtype: str, spec: Obj) -> None:
    """``ReconcilePods``: create missing replicas, drop extra ones, restart or fail on failed pods."""
    replicas = replicas_of(spec)
    rs: Obj = {}
    run.status.setdefault("replicaStatuses", {})[rtype] = rs
    for index, bucket in enumerate(st.slices(pods, rtype, replicas)):
        if len(bucket) > 1:
            continue  # upstream only logs "too many pods"
        if not bucket:
            _create_pod(run, rtype, index)
            continue
        pod = bucket[0]
        if index >= replicas or _dials_a_gone_master(run, pod, rtype):
            run.ops.delete_pod(run.job, pod)
        _check_failed_pod(run, pod, rtype, spec)
        st.count_pod(rs, pod)


def _dials_a_gone_master(run: Pass, pod: Obj, rtype: str) -> bool:
    """A live Worker whose MASTER_ADDR is not the live Master's (the Master pod was replaced and got a new
    IP). Upstream's Workers re-resolve the Master Service name when they restart; here the pod is recreated
    with the new address instead (local-cluster addition)."""
    if rtype == MASTER or run.master_addr is None or st.is_terminating(pod):
        return False
    if st.phase(pod) not in ("Pending", "Running"):
        return False
    return env_value(pod, "MASTER_ADDR") not in (None, run.master_addr)


def _check_failed_pod(run: Pass, pod: Obj, rtype: str, spec: Obj) -> None:
    code = st.exit_code(pod)
    if code is not None:
        meta = pod["metadata"]
        run.emit(
            "Normal", "ExitedWithCode", f"Pod: {meta['namespace']}.{meta['name']} exited with code {code}"
        )
    if st.phase(pod) != "Failed":
        return
    policy = spec.get("restartPolicy")
    retryable = (code if code is not None else st.NO_EXIT_CODE) >= st.RETRYABLE_EXIT_CODE
    if policy in ("OnFailure", "Always") or (policy == "ExitCode" and retryable):
        run.ops.delete_pod(run.job, pod)
        message = f"job {run.name} is restarting because {rtype} replica(s) failed."
        run.emit("Warning", cond.reason("Restarting"), message)
        cond.set_condition(run.status, cond.RESTARTING, "True", cond.reason("Restarting"), message, run.now)
    elif policy == "ExitCode":
        message = f'job "{run.name}" is failing because "{rtype}" replica(s) failed.'
        run.emit("Warning", cond.reason("Failed"), message)
        st.mark_completed(run.status, run.now)  # upstream leaves it unset; TTL needs it
        cond.set_condition(run.status, cond.FAILED, "True", cond.reason("Failed"), message, run.now)


def _create_pod(run: Pass, rtype: str, index: int) -> None:
    uid = None
    if rtype == MASTER:
        uid = new_uid()
        template_spec = (replica_specs(run.job)[rtype].get("template") or {}).get("spec") or {}
        reserved = run.ops.reserve_pod_ip(uid, bool(template_spec.get("hostNetwork")))
        run.master_addr = reserved or replica_name(run.name, MASTER, 0)
    elif MASTER in replica_specs(run.job) and run.master_addr is None:
        return  # wait for a live Master: its address goes into this pod's environment
    if template_sets_restart_policy(run.job, rtype):
        run.emit(
            "Warning",
            "SetPodTemplateRestartPolicy",
            "Restart policy in pod template will be overwritten by restart policy in replica spec",
        )
    pod = build_pod(run.job, rtype, index, run.master_addr or "")
    if uid is not None:
        pod["metadata"]["uid"] = uid
    if not run.ops.create_pod(run.job, pod) and uid is not None:
        run.ops.release_pod_ip(uid)
        run.master_addr = None


# -- services ------------------------------------------------------------------------------------------
def _reconcile_services(run: Pass, services: list[Obj], rtype: str, spec: Obj) -> None:
    replicas = replicas_of(spec)
    for index, bucket in enumerate(st.slices(services, rtype, replicas)):
        if not bucket:
            run.ops.create_service(run.job, build_service(run.job, rtype, index))
        elif len(bucket) == 1 and index >= replicas:
            meta = bucket[0]["metadata"]
            run.ops.delete_service(run.job, meta["namespace"], meta["name"])


# -- cleanup -------------------------------------------------------------------------------------------
def _cleanup_resources(run: Pass, pods: list[Obj]) -> None:
    _delete_pods_and_services(run, pods)
    if not is_suspended(run.job):
        _cleanup_job(run)


def _delete_pods_and_services(run: Pass, pods: list[Obj]) -> None:
    """``DeletePodsAndServices``: everything while the job runs; by cleanPodPolicy once it finished
    (None: nothing; Running: running and pending pods; All: all). Services go with their pods."""
    finished = cond.is_finished(run.status)
    policy = run_policy(run.job).get("cleanPodPolicy") or CLEAN_POD_POLICY_NONE
    if not pods or (finished and policy == CLEAN_POD_POLICY_NONE):
        return
    for pod in pods:
        if finished and policy == "Running" and st.phase(pod) not in ("Running", "Pending"):
            continue
        run.ops.delete_pod(run.job, pod)
        run.ops.delete_service(run.job, pod["metadata"]["namespace"], pod["metadata"]["name"])


def _cleanup_job(run: Pass) -> None:
    """``CleanupJob``: delete the job once ``ttlSecondsAfterFinished`` passed its completion time."""
    expiry = ttl_expiry(run.job, run.status)
    if expiry is not None and run.now > expiry:
        run.ops.delete_job(run.job)


def ttl_expiry(job: Obj, status: Obj) -> float | None:
    ttl = run_policy(job).get("ttlSecondsAfterFinished")
    if ttl is None or not status.get("completionTime"):
        return None
    return parse_time(status["completionTime"]) + float(ttl)


def time_rule_due(job: Obj, now: float) -> bool:
    """Whether a time-based rule (active deadline, TTL) needs a reconcile although nothing changed."""
    status = job.get("status") or {}
    if cond.is_finished(status):
        expiry = ttl_expiry(job, status)
        return expiry is not None and now > expiry and not is_suspended(job)
    return not is_suspended(job) and st.past_active_deadline(job, status, now)


__all__ = ["Ops", "sync_pytorchjob", "time_rule_due", "ttl_expiry"]
