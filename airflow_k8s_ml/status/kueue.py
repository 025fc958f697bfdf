"""A Kueue ``Workload`` read into a pure :class:`QueueState`: queued where, admitted when, why not, evicted.

Why here: Kueue says why a queued job is not running only on the ``Workload`` it creates for the job
(``kueue.x-k8s.io/v1beta1``), never on the job itself (which just stays suspended). The trigger logs this
state once per change, and the admission deadline's failure message quotes its reason, so a user reads
``insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed`` instead of "Job
suspended". Standard library only; no I/O.

Upstream semantics (``apis/kueue/v1beta1/workload_types.go``, ``pkg/workload``):

- ``QuotaReserved`` False, reason ``Pending``: not admitted; the message is the scheduler's
  (``couldn't assign flavors to pod set main: insufficient unused quota ...``);
- ``Admitted`` True: quota reserved and admission checks passed; its ``lastTransitionTime`` is the
  admission time and ``status.admission.clusterQueue`` the ClusterQueue that admitted it;
- ``Evicted`` True, reason ``Preempted`` (or ``PodsReadyTimeout``, ``InactiveWorkload``, ...): Kueue
  suspends the job again and requeues the workload (``status.requeueState.count`` counts the requeues);
- ``Finished`` True: the job ended; the workload no longer holds quota.

Kueue reports no queue position on the Workload (only its visibility API, ``pendingworkloads``, does):
``position`` is taken from a caller that has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.status._conditions import find, is_true, status_of

__all__ = [
    "JOB_UID_LABEL",
    "KUEUE_API_VERSION",
    "QUEUE_NAME_LABEL",
    "QueueState",
    "admission_reason",
    "follow",
    "queue_line",
    "queue_state",
    "queued_job_uid",
    "workload_for",
]

#: The label a job is queued by (the job's), and the one Kueue puts on the Workload it creates for a job.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta1"


@dataclass(frozen=True)
class QueueState:
    """Where a queued job stands. ``reason``/``message``: of the condition that explains the state
    (Evicted while evicted, else Admitted when admitted, else QuotaReserved); ``admitted_at``: the
    ``lastTransitionTime`` of ``Admitted`` True; ``requeues``: ``status.requeueState.count``."""

    workload: str
    queue: str
    cluster_queue: str = ""
    admitted: bool = False
    admitted_at: str | None = None
    reason: str = ""
    message: str = ""
    evicted: bool = False
    eviction_reason: str = ""
    finished: bool = False
    requeues: int = 0
    position: int | None = None

    @property
    def preempted(self) -> bool:
        return self.evicted and self.eviction_reason == "Preempted"

    @property
    def waiting(self) -> bool:
        """Still waiting for (re-)admission: not admitted, or evicted and not yet re-admitted."""
        return not self.finished and (not self.admitted or self.evicted)

    def key(self) -> str:
        """What a change is: what the task log would say (:func:`queue_line`), so a change it does not
        show (e.g. ``Admitted`` turning False after ``Evicted`` turned True) is not logged again."""
        return queue_line("", self)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def queue_state(workload: Mapping[str, Any], *, position: int | None = None) -> QueueState:
    """Read one Workload (see the module doc for the conditions' meaning)."""
    meta = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    status = status_of(workload)
    admission = status.get("admission") or {}
    requeue = status.get("requeueState") or {}
    reserved = find(workload, "QuotaReserved")
    admitted = find(workload, "Admitted")
    evicted = find(workload, "Evicted")
    explaining = evicted if is_true(evicted) else admitted if is_true(admitted) else reserved
    count = requeue.get("count") if isinstance(requeue, Mapping) else None
    return QueueState(
        workload=_text(meta.get("name")),
        queue=_text(spec.get("queueName")),
        cluster_queue=_text(admission.get("clusterQueue")) if isinstance(admission, Mapping) else "",
        admitted=is_true(admitted),
        admitted_at=_text((admitted or {}).get("lastTransitionTime")) or None if is_true(admitted) else None,
        reason=_text((explaining or {}).get("reason")),
        message=_text((explaining or {}).get("message")),
        evicted=is_true(evicted),
        eviction_reason=_text((evicted or {}).get("reason")) if is_true(evicted) else "",
        finished=is_true(find(workload, "Finished")),
        requeues=count if isinstance(count, int) and not isinstance(count, bool) else 0,
        position=position,
    )


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(ref, Mapping) and ref.get("uid") == uid and ref.get("controller") for ref in refs)


def queued_job_uid(job: Mapping[str, Any]) -> str | None:
    """The uid to find a job's Workload by, when the job is queued (carries the queue-name label)."""
    meta = job.get("metadata") or {}
    uid = meta.get("uid")
    if not (meta.get("labels") or {}).get(QUEUE_NAME_LABEL) or not isinstance(uid, str) or not uid:
        return None
    return uid


def follow(
    previous: QueueState | None, workloads: Iterable[Mapping[str, Any]], job_uid: str, what: str
) -> tuple[QueueState | None, str | None]:
    """One look at a queued job's Workloads (``what``: "Job ns/name"): the state to keep (``previous``
    while the Workload is not there yet) and the task-log line to write, once per change (else None).
    The trigger and the worker's wait both follow a queue through here."""
    found = workload_for(workloads, job_uid)
    if found is None:
        return previous, None
    state = queue_state(found)
    if previous is not None and previous.key() == state.key():
        return state, None
    return state, queue_line(what, state)


def workload_for(workloads: Iterable[Mapping[str, Any]], job_uid: str) -> Mapping[str, Any] | None:
    """The Workload Kueue created for the job: labelled with the job's uid, or controlled by it (its
    ownerReference, what deleting the job collects it by). The newest if several (a recreated one)."""
    if not job_uid:
        return None
    mine = [
        w
        for w in workloads
        if ((w.get("metadata") or {}).get("labels") or {}).get(JOB_UID_LABEL) == job_uid
        or _owned_by(w, job_uid)
    ]
    if not mine:
        return None
    return max(mine, key=lambda w: _text((w.get("metadata") or {}).get("creationTimestamp")))


def admission_reason(state: QueueState) -> str:
    """Why a workload is still waiting, Kueue's words first: the message an expired admission budget
    carries (``couldn't assign flavors to pod set main: insufficient unused quota ...``)."""
    if state.evicted:
        text = f"evicted ({state.eviction_reason})"
        return f"{text}: {state.message}" if state.message else text
    return state.message or state.reason or f"waiting in queue {state.queue}"


def queue_line(what: str, state: QueueState) -> str:
    """The task-log line for one state of a queued job ``what`` ("Job ns/name"), logged once per
    :meth:`QueueState.key`."""
    where = f"queue {state.queue or '?'}"
    if state.cluster_queue:
        where += f" (ClusterQueue {state.cluster_queue})"
    if state.finished:
        return f"{what}: Kueue workload {state.workload} finished"
    if state.evicted:
        how = "preempted" if state.preempted else f"evicted ({state.eviction_reason})"
        detail = f": {state.message}" if state.message else ""
        return (
            f"{what} was {how} in {where}{detail}; Kueue suspends and requeues it, "
            f"waiting for re-admission (admission_timeout applies again)"
        )
    if state.admitted:
        at = f" at {state.admitted_at}" if state.admitted_at else ""
        return f"{what} admitted by {where}{at}"
    position = f", position {state.position}" if state.position is not None else ""
    reason = f" [{state.reason}]" if state.reason else ""
    message = f": {state.message}" if state.message else ""
    return f"{what} waiting for admission in {where}{position}{reason}{message}"
