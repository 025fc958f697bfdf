"""``WorkloadRecord``: the identity of the workload an operator launched or adopted, or a sensor waits for.

Why public: the operators persist it in ``task_state_store`` before deferring, the sensor builds one for a
workload somebody else launched, and both hand it to the shared wait (:mod:`.waiting`). Pure data, standard
library only, so importing it costs nothing at DAG parse time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the wait decision (and its classifiers) loads when a wait starts, not at parse time
    from airflow_k8s_ml.status.wait import Target

__all__ = ["WorkloadRecord"]


@dataclass(frozen=True)
class WorkloadRecord:
    """What is persisted in ``task_state_store`` before deferring: the identity of the current attempt.

    ``submitted_at`` (epoch seconds) anchors the Airflow-side deadlines of this attempt, so an adopting retry
    continues the same budget instead of starting a new one. ``result`` caches the XCom of a succeeded
    attempt: a retry then returns it even when the object is already deleted.
    """

    kind: str
    api_version: str
    name: str
    namespace: str
    uid: str
    attempt: int
    submitted_at: float
    resumed_from: str | None = None
    result: Mapping[str, Any] | None = None

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace, "uid": self.uid}

    def target(self) -> Target:
        """What the wait decision (``status.decide``) needs of it."""
        from airflow_k8s_ml.status.wait import Target

        return Target(self.kind, self.name, self.namespace, self.uid, self.submitted_at)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **self.identity(),
            "api_version": self.api_version,
            "attempt": self.attempt,
            "submitted_at": self.submitted_at,
            "resumed_from": self.resumed_from,
        }
        if self.result is not None:
            out["result"] = dict(self.result)
        return out

    @classmethod
    def from_dict(cls, value: Any) -> WorkloadRecord | None:
        """Tolerant: a malformed or foreign value means "nothing remembered" (labels still guard us)."""
        if not isinstance(value, Mapping):
            return None
        try:
            return cls(
                kind=str(value["kind"]),
                api_version=str(value["api_version"]),
                name=str(value["name"]),
                namespace=str(value["namespace"]),
                uid=str(value["uid"]),
                attempt=int(value["attempt"]),
                submitted_at=float(value["submitted_at"]),
                resumed_from=value.get("resumed_from") or None,
                result=value.get("result") if isinstance(value.get("result"), Mapping) else None,
            )
        except (KeyError, TypeError, ValueError):
            return None
