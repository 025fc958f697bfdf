"""One reconcile of a training-operator v1 job: ``JobController.ReconcileJobs`` (release-1.9,
``pkg/controller.v1/common``), for PyTorchJob here and TFJob (``controllers/tfjob``) alike.

The order is upstream's: finished jobs only clean up (cleanPodPolicy, TTL); suspended jobs lose their pods
and services; then the backoff limit and the active deadline may fail the job (deleting every pod and
Service); otherwise each replica type gets its pods and Services reconciled and the kind's
``UpdateJobStatus`` derives the conditions. All I/O goes through :class:`Ops` (the controller), so this
module only decides. What differs per kind is a :class:`Flavor`: its :class:`~.api.Framework` (names),
the environment its ``SetClusterSpec`` adds, which replicas have the master role, its ``UpdateJobStatus``,
and which replicas' addresses the environment names.

One addition for the local cluster: nothing resolves Service names on a laptop, so the replicas whose
addresses go into the environment (a PyTorchJob's Master; every replica of a distributed TFJob) are given
pod IPs reserved in advance (by the uid the pod is created with), and the other replicas are created only
once those addresses are known, so ``MASTER_ADDR`` or ``TF_CONFIG`` always names where the processes
listen (upstream uses the Services' DNS names).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ...meta import new_uid, parse_time, rfc3339
from . import conditions as cond
from . import status as st
from .api import (
    CLEAN_POD_POLICY_NONE,
    MASTER,
    PYTORCH,
    Framework,
    Obj,
    is_suspended,
    managed_here,
    replica_name,
    replicas_of,
    run_policy,
)
from .pods import build_replica_pod, build_service, env_value, pod_env, template_sets_restart_policy

Slot = tuple[str, int]  # (replica type, index)
Addresses = Mapping[Slot, str | None]


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


@dataclass(frozen=True)
class Flavor:
    """What one v1 kind adds to the common job logic (the controller interface upstream's kinds implement:
    ``SetClusterSpec``, ``IsMasterRole``, ``UpdateJobStatus``), plus the local cluster's address plan."""

    fw: Framework
    #: the replicas whose addresses the environment names
    address_slots: Callable[[Obj], list[Slot]]
    #: ``SetClusterSpec``: the variables appended to every container of one replica
    pod_env: Callable[[Obj, str, int, Addresses], list[Obj]]
    #: ``IsMasterRole``: whether the replica's pod gets ``job-role=master``
    is_master_role: Callable[[Obj, str, int], bool]
    #: ``UpdateJobStatus``
    update_job_status: Callable[[Obj, Obj, float, st.Emit, list[Obj]], None]
    #: a live pod whose environment names an address that moved: recreated (None: never)
    stale: Callable[[Obj, str, Addresses], bool] | None = None
    #: the one container that gets :attr:`pod_env` (None: every container, as PyTorchJob's ``setPodEnv``)
    env_container: str | None = None


@dataclass
class Pass:
    """State of one reconcile: the job, its status being computed, and where the addressed replicas
    listen (None: not known yet)."""

    ops: Ops
    flavor: Flavor
    job: Obj
    status: Obj
    now: float
    addresses: dict[Slot, str | None] = field(default_factory=dict)
    planned: dict[Slot, str] = field(default_factory=dict)  # slot -> uid reserved for its new pod

    def emit(self, type_: str, reason: str, message: str) -> None:
        self.ops.event(self.job, type_, reason, message)

    def reason(self, suffix: str) -> str:
        return self.flavor.fw.reason(suffix)

    @property
    def fw(self) -> Framework:
        return self.flavor.fw

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])


# -- PyTorchJob's flavor -------------------------------------------------------------------------------
def _pytorch_slots(job: Obj) -> list[Slot]:
    return [(MASTER, 0)] if MASTER in PYTORCH.replica_specs(job) else []


def _pytorch_env(job: Obj, rtype: str, index: int, addresses: Addresses) -> list[Obj]:
    return pod_env(job, rtype, index, addresses.get((MASTER, 0)) or "")


def _dials_a_gone_master(pod: Obj, rtype: str, addresses: Addresses) -> bool:
    """A live Worker whose MASTER_ADDR is not the live Master's (the Master pod was replaced and got a new
    IP). Upstream's Workers re-resolve the Master Service name when they restart; here the pod is recreated
    with the new address instead (local-cluster addition)."""
    master_addr = addresses.get((MASTER, 0))
    if rtype == MASTER or master_addr is None or st.is_terminating(pod):
        return False
    if st.phase(pod) not in ("Pending", "Running"):
        return False
    return env_value(pod, "MASTER_ADDR") not in (None, master_addr)


PYTORCH_FLAVOR = Flavor(
    fw=PYTORCH,
    address_slots=_pytorch_slots,
    pod_env=_pytorch_env,
    is_master_role=lambda job, rtype, index: rtype == MASTER,
    update_job_status=st.update_job_status,
    stale=_dials_a_gone_master,
)


def sync_pytorchjob(ops: Ops, job: Obj) -> None:
    sync_job(ops, job, PYTORCH_FLAVOR)


def sync_job(ops: Ops, job: Obj, flavor: Flavor) -> None:
    """One ``ReconcileJobs`` of ``job``, a kind described by ``flavor``."""
    if job["metadata"].get("deletionTimestamp") or not managed_here(job):
        return
    old = st.normalized(job.get("status"))
    run = Pass(ops, flavor, job, copy.deepcopy(old), ops.now())
    cond.set_condition(
        run.status,
        cond.CREATED,
        "True",
        run.reason("Created"),
        f"{run.fw.kind} {run.name} is created.",
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
    message = f"{run.fw.kind} {run.name} is suspended."
    why = run.reason("Suspended")
    if cond.is_true(run.status, cond.RUNNING):
        cond.set_condition(run.status, cond.RUNNING, "False", why, message, run.now)
    if not cond.is_true(run.status, cond.SUSPENDED):
        cond.set_condition(run.status, cond.SUSPENDED, "True", why, message, run.now)
    run.emit("Normal", why, message)


def _active(run: Pass, pods: list[Obj]) -> None:
    if cond.is_true(run.status, cond.SUSPENDED):
        message = f"{run.fw.kind} {run.name} is resumed."
        cond.set_condition(run.status, cond.SUSPENDED, "False", run.reason(cond.RESUMED), message, run.now)
        run.status["startTime"] = rfc3339(run.now)
        run.emit("Normal", run.reason(cond.RESUMED), message)
    for reason, message in st.abnormal_pod_events(st.active_pods(pods)):
        run.emit("Warning", reason, message)
    failure = st.limit_failure(run.job, run.status, pods, run.fw.total_replicas(run.job), run.now, run.fw)
    if failure is not None:
        _fail(run, pods, failure)
        return
    _plan_addresses(run, pods)
    services = run.ops.services_of(run.job)
    for rtype, spec in run.fw.replica_specs(run.job).items():
        _reconcile_pods(run, pods, rtype, spec)
        _reconcile_services(run, services, rtype, spec)
    _release_unused(run)
    run.flavor.update_job_status(run.job, run.status, run.now, run.emit, pods)


def _fail(run: Pass, pods: list[Obj], message: str) -> None:
    """Backoff limit or deadline: completion time, every pod and Service deleted, then Failed."""
    st.mark_completed(run.status, run.now)
    _delete_pods_and_services(run, pods)
    _cleanup_job(run)
    run.emit("Normal", run.reason("Failed"), message)
    cond.set_condition(run.status, cond.FAILED, "True", run.reason("Failed"), message, run.now)


# -- addresses -----------------------------------------------------------------------------------------
def _live(pod: Obj) -> bool:
    return not st.is_terminating(pod) and st.phase(pod) not in ("Failed", "Succeeded")


def _host_network(run: Pass, rtype: str) -> bool:
    template_spec = (run.fw.replica_specs(run.job)[rtype].get("template") or {}).get("spec") or {}
    return bool(template_spec.get("hostNetwork"))


def _plan_addresses(run: Pass, pods: list[Obj]) -> None:
    """Where each addressed replica listens: a live pod's IP (the allocator is idempotent by uid), or, for a
    replica with no pod at all, an IP reserved now for the uid its pod will be created with. A replica whose
    pod is finishing or being replaced has no address yet: the pods that would name it wait."""
    for rtype, index in run.flavor.address_slots(run.job):
        replicas = replicas_of(run.fw.replica_specs(run.job)[rtype])
        bucket = st.slices(pods, rtype, replicas)[index]
        live = [p for p in bucket if _live(p)]
        if live:
            uid = live[0]["metadata"].get("uid", "")
        elif not bucket:
            uid = new_uid()
            run.planned[(rtype, index)] = uid
        else:
            run.addresses[(rtype, index)] = None
            continue
        reserved = run.ops.reserve_pod_ip(uid, _host_network(run, rtype))
        run.addresses[(rtype, index)] = reserved or replica_name(run.name, rtype, index)


def _release_unused(run: Pass) -> None:
    """An IP reserved for a pod this pass did not create goes back to the allocator."""
    for uid in run.planned.values():
        run.ops.release_pod_ip(uid)
    run.planned.clear()


# -- pods ----------------------------------------------------------------------------------------------


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
        stale = run.flavor.stale
        if index >= replicas or (stale is not None and stale(pod, rtype, run.addresses)):
            run.ops.delete_pod(run.job, pod)
        _check_failed_pod(run, pod, rtype, spec)
        st.count_pod(rs, pod)


def _check_failed_pod(run: Pass, pod: Obj, rtype: str, spec: Obj) -> None:
    code = st.exit_code(pod, run.fw.container)
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
        run.emit("Warning", run.reason("Restarting"), message)
        cond.set_condition(run.status, cond.RESTARTING, "True", run.reason("Restarting"), message, run.now)
    elif policy == "ExitCode":
        message = f'job "{run.name}" is failing because "{rtype}" replica(s) failed.'
        run.emit("Warning", run.reason("Failed"), message)
        st.mark_completed(run.status, run.now)  # upstream leaves it unset; TTL needs it
        cond.set_condition(run.status, cond.FAILED, "True", run.reason("Failed"), message, run.now)


def _create_pod(run: Pass, rtype: str, index: int) -> None:
    if any(address is None for address in run.addresses.values()):
        return  # wait: an address this pod's environment names is not known yet
    if template_sets_restart_policy(run.job, rtype, run.fw):
        run.emit(
            "Warning",
            "SetPodTemplateRestartPolicy",
            "Restart policy in pod template will be overwritten by restart policy in replica spec",
        )
    env = run.flavor.pod_env(run.job, rtype, index, run.addresses)
    master_role = run.flavor.is_master_role(run.job, rtype, index)
    pod = build_replica_pod(run.fw, run.job, rtype, index, env, master_role, run.flavor.env_container)
    uid = run.planned.pop((rtype, index), None)
    if uid is not None:
        pod["metadata"]["uid"] = uid
    if not run.ops.create_pod(run.job, pod) and uid is not None:
        run.ops.release_pod_ip(uid)
        run.addresses[(rtype, index)] = None


# -- services ------------------------------------------------------------------------------------------
def _reconcile_services(run: Pass, services: list[Obj], rtype: str, spec: Obj) -> None:
    replicas = replicas_of(spec)
    for index, bucket in enumerate(st.slices(services, rtype, replicas)):
        if not bucket:
            run.ops.create_service(run.job, build_service(run.job, rtype, index, run.fw))
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


__all__ = [
    "PYTORCH_FLAVOR",
    "Addresses",
    "Flavor",
    "Ops",
    "Slot",
    "sync_job",
    "sync_pytorchjob",
    "time_rule_due",
    "ttl_expiry",
]
