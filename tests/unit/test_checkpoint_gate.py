"""The gate's policy as a pure function: pass, every failed rule, no silent fallback, allow_older says so."""

from __future__ import annotations

import pytest

from airflow_k8s_ml.checkpoints.gate import check_gate
from airflow_k8s_ml.checkpoints.rules import parse_rules
from airflow_k8s_ml.checkpoints.store import Checkpoint, Scan
from airflow_k8s_ml.errors import CheckpointError, MetricGateFailed

BASE = "s3://b/run1"
GOOD = Checkpoint(f"{BASE}/step-2/", 2, True, {"val_accuracy": 0.95, "loss": 0.1}, "2026-01-01T00:00:00.000Z")
BROKEN = Checkpoint(f"{BASE}/step-3/", 3, False, problem="no MANIFEST.json (2 objects; upload unfinished)")
RULES = parse_rules({"val_accuracy": ">= 0.90", "loss": "< 0.5"})


def test_pass_returns_the_xcom_shape() -> None:
    result = check_gate(Scan(GOOD, []), RULES, False, BASE)
    assert result.to_xcom() == {
        "uri": f"{BASE}/step-2/",
        "step": 2,
        "metrics": {"val_accuracy": 0.95, "loss": 0.1},
        "created_at": "2026-01-01T00:00:00.000Z",
    }
    assert result.note is None


def test_metric_failure_lists_each_failed_rule() -> None:
    weak = Checkpoint(f"{BASE}/step-2/", 2, True, {"val_accuracy": 0.8})
    with pytest.raises(MetricGateFailed) as info:
        check_gate(Scan(weak, []), RULES, False, BASE)
    assert str(info.value) == (
        f"checkpoint step-2 ({BASE}/step-2/) failed 2 of 2 metric rules:\n"
        "  - val_accuracy >= 0.9: got 0.8\n"
        "  - loss < 0.5: metric missing (checkpoint has: val_accuracy)"
    )


def test_newer_unusable_checkpoint_fails_unless_allow_older() -> None:
    with pytest.raises(CheckpointError) as info:
        check_gate(Scan(GOOD, [BROKEN]), RULES, False, BASE)
    message = str(info.value)
    assert "step-3" in message and "no MANIFEST.json" in message and "allow_older=True" in message
    assert not isinstance(info.value, MetricGateFailed)

    result = check_gate(Scan(GOOD, [BROKEN]), RULES, True, BASE)
    assert result.checkpoint.step == 2
    xcom = result.to_xcom()
    assert xcom["skipped_newer"] == [{"uri": BROKEN.uri, "step": 3, "problem": BROKEN.problem}]
    assert "gated step-2 instead of newer unusable step-3" in xcom["note"]


def test_nothing_complete() -> None:
    with pytest.raises(
        CheckpointError,
        match=r"no complete checkpoint under s3://b/run1: found 1 step folder, none complete:\n  - step-3",
    ):
        check_gate(Scan(None, [BROKEN]), RULES, True, BASE)
    with pytest.raises(CheckpointError, match="no step-<N> folders"):
        check_gate(Scan(None, []), RULES, True, BASE)
