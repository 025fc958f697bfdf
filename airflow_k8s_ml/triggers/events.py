"""``WorkloadEvent``: the one event :class:`~airflow_k8s_ml.triggers.workload.WorkloadTrigger` fires.

Why a typed event: the operator, the sensor and the tests read the same fields instead of branching on
hand-built dict keys (what the cncf provider does in ten places). It crosses the triggerer -> worker
boundary as JSON via :meth:`WorkloadEvent.to_payload` / :meth:`WorkloadEvent.from_payload`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.status import WorkloadState

if TYPE_CHECKING:
    from airflow_k8s_ml.status.wait import Decision, Target

__all__ = ["OUTCOMES", "WorkloadEvent"]

#: succeeded/failed: the workload's terminal state; deadline: an Airflow-side budget ran out (the workload
#: still runs: the operator deletes it); error: the wait itself failed (workload deleted or replaced,
#: API access refused) - ``message`` says which.
OUTCOMES = ("succeeded", "failed", "deadline", "error")


@dataclass(frozen=True)
class WorkloadEvent:
    """Everything the operator needs to finish: identity, final state, a message to fail with.

    ``expired_deadline``: on a ``deadline`` outcome, the budget that ran out, by its argument name
    (``admission_timeout``, ``startup_timeout``, ``run_timeout`` or ``deadline``). ``pods``: failed or stuck
    pods (``replica``, ``pod``, ``problem``, ``exit_code``, ``finished_at``,
    ``last_lines`` - at most ~20 lines each, first failure first); ``warnings``: Warning events of the
    workload and its pods; ``log_cursor``: per replica, the last log line relayed (``{"ts": ..., "n": ...}``)
    so whoever reads the logs next starts after it. ``admitted_at``: when Kueue admitted a queued workload
    (its Workload's ``Admitted`` condition turned True), None when it was not queued or Kueue is absent.
    ``disruptions``: the workload's pods the cluster took away while this wait watched
    (:meth:`~airflow_k8s_ml.status.disruption.Disruption.to_payload`, oldest first).
    """

    outcome: str
    kind: str
    name: str
    namespace: str
    uid: str
    state: dict[str, Any]
    message: str
    expired_deadline: str | None = None
    log_cursor: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    admitted_at: str | None = None
    disruptions: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {self.outcome!r}")

    @classmethod
    def decided(
        cls,
        decision: Decision,
        target: Target,
        *,
        message: str | None = None,
        pods: list[dict[str, Any]] | None = None,
        warnings: list[str] | None = None,
        log_cursor: dict[str, Any] | None = None,
    ) -> WorkloadEvent:
        """The event for a finished :func:`~airflow_k8s_ml.status.decide` (the trigger and the sync wait
        both report through here); ``message`` replaces the decision's once the failed pods are read."""
        return cls(
            outcome=decision.verdict,
            kind=target.kind,
            name=target.name,
            namespace=target.namespace,
            uid=decision.uid or target.uid,
            state=decision.state.to_payload(),
            message=decision.message if message is None else message,
            expired_deadline=decision.expired,
            log_cursor=log_cursor or None,
            pods=pods or [],
            warnings=warnings or [],
        )

    @classmethod
    def error(
        cls,
        target: Target,
        message: str,
        *,
        uid: str = "",
        state: WorkloadState | None = None,
        log_cursor: dict[str, Any] | None = None,
    ) -> WorkloadEvent:
        """The ``error`` event of a wait that could not go on (not a decision about the workload)."""
        return cls(
            outcome="error",
            kind=target.kind,
            name=target.name,
            namespace=target.namespace,
            uid=uid or target.uid,
            state=(state or WorkloadState("pending")).to_payload(),
            message=message,
            log_cursor=log_cursor or None,
        )

    @property
    def workload_state(self) -> WorkloadState:
        return WorkloadState.from_payload(self.state)

    def to_payload(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "state": copy.deepcopy(self.state),
            "message": self.message,
            "expired_deadline": self.expired_deadline,
            "log_cursor": copy.deepcopy(self.log_cursor),
            "pods": copy.deepcopy(self.pods),
            "warnings": list(self.warnings),
            "admitted_at": self.admitted_at,
            "disruptions": copy.deepcopy(self.disruptions),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> WorkloadEvent:
        return cls(
            outcome=str(payload["outcome"]),
            kind=str(payload.get("kind") or ""),
            name=str(payload.get("name") or ""),
            namespace=str(payload.get("namespace") or ""),
            uid=str(payload.get("uid") or ""),
            state=copy.deepcopy(dict(payload.get("state") or {"phase": "pending"})),
            message=str(payload.get("message") or ""),
            # ``deadline_phase``: the key of the previous version's events
            expired_deadline=payload.get("expired_deadline") or payload.get("deadline_phase"),
            log_cursor=copy.deepcopy(payload.get("log_cursor")),
            pods=copy.deepcopy(list(payload.get("pods") or [])),
            warnings=[str(w) for w in payload.get("warnings") or []],
            admitted_at=payload.get("admitted_at") or None,
            disruptions=copy.deepcopy(list(payload.get("disruptions") or [])),
        )
