"""The checkpoint gate's decision, as a pure function of a :class:`~.store.Scan` and the rules.

Kept out of the operator so the policy ("never fall back silently to an older checkpoint", "report every
failed rule") is testable without Airflow and reusable by other callers (a CLI, a deploy step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.checkpoints.rules import MetricRule, evaluate
from airflow_k8s_ml.checkpoints.store import Checkpoint, Scan
from airflow_k8s_ml.errors import CheckpointError, MetricGateFailed


@dataclass(frozen=True)
class GateResult:
    """The checkpoint that passed, and the newer ones passed over (only non-empty with ``allow_older``)."""

    checkpoint: Checkpoint
    skipped: list[Checkpoint]

    @property
    def note(self) -> str | None:
        """Says out loud that an older checkpoint was chosen, for the task log and the XCom."""
        if not self.skipped:
            return None
        newer = ", ".join(f"step-{c.step} ({c.problem})" for c in self.skipped)
        return f"allow_older=True: gated step-{self.checkpoint.step} instead of newer unusable {newer}"

    def to_xcom(self) -> dict[str, Any]:
        out = self.checkpoint.to_xcom()
        if self.skipped:
            out["skipped_newer"] = [
                {"uri": c.uri, "step": c.step, "problem": c.problem} for c in self.skipped
            ]
            out["note"] = self.note
        return out


def check_gate(scan: Scan, rules: list[MetricRule], allow_older: bool, base_uri: str) -> GateResult:
    """Pick the checkpoint to gate and apply the rules; raise with everything that was wrong.

    Raises CheckpointError when nothing complete exists, or when a newer checkpoint is incomplete/corrupt and
    ``allow_older`` is False; MetricGateFailed listing each failed rule with the value seen.
    """
    latest = scan.latest
    if latest is None:
        raise CheckpointError(f"no complete checkpoint under {base_uri}: {_found(scan.skipped)}")
    if scan.skipped and not allow_older:
        raise CheckpointError(
            f"the newest checkpoint under {base_uri} is not usable:\n{_bullets(scan.skipped)}\n"
            f"newest complete is step-{latest.step} ({latest.uri}); "
            "set allow_older=True to gate that one instead"
        )
    failures = evaluate(rules, latest.metrics)
    if failures:
        lines = "\n".join(f"  - {f}" for f in failures)
        raise MetricGateFailed(
            f"checkpoint step-{latest.step} ({latest.uri}) failed "
            f"{len(failures)} of {len(rules)} metric rules:\n{lines}"
        )
    return GateResult(latest, list(scan.skipped))


def _found(skipped: list[Checkpoint]) -> str:
    """What was there instead, starting on the first line (a task's failure summary shows only that one)."""
    if not skipped:
        return "no step-<N> folders there (the base is empty or does not exist)"
    count = f"{len(skipped)} step folder{'s' if len(skipped) > 1 else ''}"
    return f"found {count}, none complete:\n{_bullets(skipped)}"


def _bullets(checkpoints: list[Checkpoint]) -> str:
    return "\n".join(f"  - step-{c.step} ({c.uri}): {c.problem}" for c in checkpoints)
