"""``WorkloadState``: the one answer every status interpreter gives ("where is this workload?").

Why one type: the trigger, the operator's re-entry (adopt after a crash) and the sensors must agree on what
"done" means. They all call :func:`airflow_k8s_ml.status.classify` and get this frozen value, which also
crosses the trigger -> operator boundary as a JSON payload (``to_payload``/``from_payload``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

__all__ = ["FAILED", "PENDING", "PHASES", "RUNNING", "SUCCEEDED", "Phase", "WorkloadState"]

Phase = Literal["pending", "running", "succeeded", "failed"]
PENDING: Phase = "pending"
RUNNING: Phase = "running"
SUCCEEDED: Phase = "succeeded"
FAILED: Phase = "failed"
PHASES: tuple[Phase, ...] = (PENDING, RUNNING, SUCCEEDED, FAILED)


@dataclass(frozen=True, slots=True)
class WorkloadState:
    """Phase plus a machine-readable ``reason`` (e.g. ``BackoffLimitExceeded``) and a human ``message``.

    ``details`` holds JSON-serialisable extras (counts, timestamps, the raw condition reason) for XCom and
    logs; it never decides anything.
    """

    phase: Phase
    reason: str = ""
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {self.phase!r}")
        object.__setattr__(self, "details", dict(self.details))

    @property
    def terminal(self) -> bool:
        return self.phase in (SUCCEEDED, FAILED)

    @property
    def succeeded(self) -> bool:
        return self.phase == SUCCEEDED

    @property
    def failed(self) -> bool:
        return self.phase == FAILED

    def summary(self) -> str:
        """``failed (BackoffLimitExceeded): Job has reached the specified backoff limit``."""
        text: str = self.phase
        if self.reason:
            text += f" ({self.reason})"
        if self.message:
            text += f": {self.message}"
        return text

    def to_payload(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "reason": self.reason,
            "message": self.message,
            "details": copy.deepcopy(dict(self.details)),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> WorkloadState:
        return cls(
            phase=cast(Phase, payload["phase"]),
            reason=str(payload.get("reason") or ""),
            message=str(payload.get("message") or ""),
            details=copy.deepcopy(dict(payload.get("details") or {})),
        )
