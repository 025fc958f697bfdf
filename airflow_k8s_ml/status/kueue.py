"""A Kueue ``Workload`` read into a pure :class:`QueueState`: queued where, admitted when, why not, evicted.

Why here: Kueue says why a queued job is not running only on the ``Workload`` it creates for the job
(``kueue.x-k8s.io/v1beta2``, or ``v1beta1`` on a Kueue < 0.16: :func:`kueue_version` picks), never on the
job itself (which just stays suspended). The trigger logs this
state once per change, and the admission deadline's failure message quotes its reason, so a user reads
``insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed`` instead of "Job
suspended". Standard library only; no I/O.

Upstream semantics (``apis/kueue/v1beta2/workload_types.go``, ``pkg/workload``):

- ``QuotaReserved`` False, reason ``Pending``: not admitted; the message is the scheduler's
  (``couldn't assign flavors to pod set main: insufficient unused quota ...``);
- ``Admitted`` True: quota reserved and admission checks passed; its ``lastTransitionTime`` is the
  admission time and ``status.admission.clusterQueue`` the ClusterQueue that admitted it;
- ``Evicted`` True, reason ``Preempted`` (or ``PodsReadyTimeout``, ``InactiveWorkload``, ...): Kueue
  suspends the job again and requeues the workload (``status.requeueState.count`` counts the requeues);
- ``Finished`` True: the job ended; the workload no longer holds quota.

Kueue reports no queue position on the Workload: only its on-demand visibility API does
(``GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/{name}/pendingworkloads``, a
``PendingWorkloadsSummary``). The waits ask it (:func:`next_position_ask` says when) and pass the summary to
:func:`follow`, which picks our workload's ``positionInClusterQueue`` out of it (:func:`position_in`): the
order the ClusterQueue admits in, across all its LocalQueues. Kueue counts from 0; the task log counts
from 1 (``position 1 (next in line)``), see :func:`position_text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_k8s_ml.status._conditions import find, is_true, status_of

__all__ = [
    "JOB_UID_LABEL",
    "KUEUE_GROUP",
    "KUEUE_VERSIONS",
    "POSITION_REFRESH",
    "QUEUE_NAME_LABEL",
    "PositionAsked",
    "QueueState",
    "admission_reason",
    "follow",
    "kueue_version",
    "next_position_ask",
    "position_in",
    "position_text",
    "queue_line",
    "queue_state",
    "queued_job_uid",
    "workload_for",
]

#: The label a job is queued by (the job's), and the one Kueue puts on the Workload it creates for a job.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: Kueue's API group, and the versions we speak, newest first: v1beta2 is the storage version since Kueue
#: 0.16 (v1beta1 is served there deprecated, with a warning); a Kueue < 0.16 serves v1beta1 alone. The fields
#: this module reads (conditions, ``status.admission``, ``status.requeueState``, ``spec.queueName``) are the
#: same in both, and ``visibility.kueue.x-k8s.io`` has the same two versions with the same types.
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
#: Seconds between two asks of the visibility API while the Workload itself does not change (the one ahead
#: being admitted changes our position, not our Workload).
POSITION_REFRESH = 30.0


@dataclass(frozen=True, slots=True)
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
    position: int | None = None  # Kueue's positionInClusterQueue (0 = first), None when not reported

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
    previous: QueueState | None,
    workloads: Iterable[Mapping[str, Any]],
    job_uid: str,
    what: str,
    summary: Mapping[str, Any] | None = None,
) -> tuple[QueueState | None, str | None]:
    """One look at a queued job's Workloads (``what``: "Job ns/name"): the state to keep (``previous``
    while the Workload is not there yet) and the task-log line to write, once per change (else None).
    ``summary``: the LocalQueue's ``PendingWorkloadsSummary`` when the visibility API answered; its
    position is used only while the Workload has no quota reserved (a summary read just before the
    admission still lists it). The trigger and the worker's wait both follow a queue through here."""
    found = workload_for(workloads, job_uid)
    if found is None:
        return previous, None
    state = queue_state(found)
    if summary is not None and not state.admitted and not state.finished:
        state = replace(state, position=position_in(summary, job_uid, state.workload))
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


@dataclass(frozen=True, slots=True)
class PositionAsked:
    """One ask of the visibility API: the Workload's resourceVersion then, when, and the LocalQueue asked."""

    resource_version: str
    at: float
    queue: str = ""

    @classmethod
    def now(cls, workload: Mapping[str, Any], at: float) -> PositionAsked:
        version = _text((workload.get("metadata") or {}).get("resourceVersion"))
        return cls(version, at, _text((workload.get("spec") or {}).get("queueName")))


def next_position_ask(
    workload: Mapping[str, Any] | None,
    asked: PositionAsked | None,
    now: float,
    every: float = POSITION_REFRESH,
) -> PositionAsked | None:
    """The ask to make now, if any: only while the Workload waits without quota reserved (never once
    admitted or finished), and then on each change of the Workload or every ``every`` seconds - one GET
    each, not one per look. The waits send it (the client's ``pending_workloads(ask.queue, namespace)``)
    and keep it as their last ask."""
    if workload is None:
        return None
    state = queue_state(workload)
    if state.admitted or state.finished:
        return None
    ask = PositionAsked.now(workload, now)
    if asked is None or asked.resource_version != ask.resource_version or now - asked.at >= every:
        return ask
    return None


def position_in(summary: Mapping[str, Any], job_uid: str, workload: str) -> int | None:
    """Our ``positionInClusterQueue`` in a ``PendingWorkloadsSummary``: the item owned by the job (its
    ownerReferences carry uid, not ``controller``) or named as our Workload; None when not listed (admitted
    meanwhile, beyond the summary's ``limit``) or the answer is not a summary."""
    items = summary.get("items")
    if not isinstance(items, list):
        return None
    for item in items:
        if not isinstance(item, Mapping):
            continue
        meta = item.get("metadata") or {}
        refs = meta.get("ownerReferences") or []
        ours = (bool(job_uid) and any(isinstance(r, Mapping) and r.get("uid") == job_uid for r in refs)) or (
            bool(workload) and meta.get("name") == workload
        )
        position = item.get("positionInClusterQueue")
        if ours and isinstance(position, int) and not isinstance(position, bool) and position >= 0:
            return position
    return None


def position_text(position: int) -> str:
    """Kueue's 0-based position as a user reads it: 1-based, the first one named."""
    return "position 1 (next in line)" if position == 0 else f"position {position + 1} ({position} ahead)"


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
    position = f", {position_text(state.position)}" if state.position is not None else ""
    reason = f" [{state.reason}]" if state.reason else ""
    message = f": {state.message}" if state.message else ""
    return f"{what} waiting for admission in {where}{position}{reason}{message}"


def kueue_version(api_group: Mapping[str, Any] | None) -> str:
    """The version to speak to the cluster's Kueue, from its ``APIGroup`` (``GET /apis/kueue.x-k8s.io``):
    the newest of :data:`KUEUE_VERSIONS` it serves. No Kueue (None, or no version we know): the newest, whose
    requests then answer 404 as Kueue's absence always did."""
    served = {
        str(v.get("version")) for v in (api_group or {}).get("versions") or [] if isinstance(v, Mapping)
    }
    return next((v for v in KUEUE_VERSIONS if v in served), KUEUE_VERSIONS[0])
