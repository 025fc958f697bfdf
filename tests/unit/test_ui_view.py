"""What the Training tab says (the pure view model, the SVG and the page) for a run in progress, finished,
failed and for a task that is not a training task. Facts are shaped exactly as Airflow stores them (the
operator's own WorkloadRecord/outcome/result payloads); histories are built from real manifests on disk."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from airflow_k8s_ml.checkpoints import CheckpointWriter
from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.operators._adopt import WorkloadRecord
from airflow_k8s_ml.operators.outcome import outcome_record, result_payload
from airflow_k8s_ml.status import WorkloadState
from airflow_k8s_ml.status.disruption import Disruption, summary
from airflow_k8s_ml.ui.facts import TaskFacts
from airflow_k8s_ml.ui.history import History, HistoryReader
from airflow_k8s_ml.ui.live import LiveStatus
from airflow_k8s_ml.ui.page import duration, training_page
from airflow_k8s_ml.ui.svg import render_chart
from airflow_k8s_ml.ui.view import build_view

NOW = 1_800_000_000.0


def _history(tmp_path: Path, steps: int, *, pending: bool = False) -> tuple[str, History]:
    base = tmp_path / "ckpt"
    writer = CheckpointWriter(f"file://{base}")
    for step in range(1, steps + 1):
        metrics = {"train_loss": 1.0 / step, "val_loss": 1.1 / step, "val_accuracy": 0.5 + step / 100}
        writer.commit(step, {"model.bin": b"m" * step}, {**metrics, "epoch": step, "global_step": step * 10})
    if pending:
        (base / f"step-{steps + 1}").mkdir()
        (base / f"step-{steps + 1}" / "model.bin").write_bytes(b"partial")
    return f"file://{base}", HistoryReader().read(f"file://{base}")


def _record(attempt: int = 1, resumed_from: str | None = None) -> WorkloadRecord:
    return WorkloadRecord(
        kind="Job",
        api_version="batch/v1",
        name="nightly-fine-tune-abc-1",
        namespace="ml",
        uid="u-1",
        attempt=attempt,
        submitted_at=NOW - 600,
        resumed_from=resumed_from,
    )


def _facts(state: str, uri: str, **kwargs: object) -> TaskFacts:
    values: dict = {
        "dag_id": "nightly_finetune",
        "run_id": "manual__1",
        "task_id": "fine_tune_job",
        "map_index": -1,
        "operator": "FineTuneJobOperator",
        "state": state,
        "try_number": 1,
        "rendered": {"checkpoint_uri": uri, "aws_conn_id": "aws_default"},
        **kwargs,
    }
    return TaskFacts(**values)


def _points(svg: str) -> list[tuple[str, int, float]]:
    found = re.findall(r'data-metric="([^"]+)" data-step="(\d+)"\s+data-value="([^"]+)"', svg)
    return [(m, int(s), float(v)) for m, s, v in found]


def test_in_progress_ignores_the_uncommitted_step_and_counts_deadlines_down(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 3, pending=True)
    record = _record()
    trigger = {
        "deadlines": Deadlines.parse(
            admission_timeout=600, startup_timeout=300, run_timeout=3600, deadline=7200
        ).to_payload(),
        "task_started_at": record.submitted_at,
        "kubernetes_conn_id": "kubernetes_default",
    }
    live = LiveStatus({"phase": "running", "reason": "", "message": ""}, "running", NOW - 500, NOW - 500)
    facts = _facts("deferred", uri, record=record.to_dict(), trigger=trigger)
    view = build_view(facts, history, now=NOW, live=live)
    assert view.progress == "in progress" and view.is_training
    assert [p.step for p in view.checkpoints] == [1, 2, 3]
    assert [p.step for p in view.ignored] == [4]
    assert view.latest is not None and view.latest.step == 3
    assert view.workload == {
        "kind": "Job",
        "api_version": "batch/v1",
        "name": "nightly-fine-tune-abc-1",
        "namespace": "ml",
        "uid": "u-1",
        "attempt": 1,
    }
    assert view.live_phase == "running" and view.state_source == "live (Kubernetes)"
    left = {d.name: d.left_seconds for d in view.deadlines}
    assert left == {
        "admission_timeout": None,
        "startup_timeout": None,
        "run_timeout": 3100.0,
        "deadline": 6600.0,
    }
    svg = render_chart(view.series)
    assert sorted(_points(svg)) == sorted(
        (name, p.step, p.metrics[name])
        for p in history.complete
        for name in ("train_loss", "val_loss", "val_accuracy")
    )
    assert 'data-step="4"' not in svg  # the uncommitted step is no point
    page = training_page(view)
    assert '<meta http-equiv="refresh"' in page and "Ignored step 4" in page and "no MANIFEST.json" in page


def test_finished_shows_the_result_state_and_the_resume_point(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 5)
    record = _record(attempt=2, resumed_from=f"{uri}/step-2/")
    state = WorkloadState("succeeded", "Completed", "", {"startTime": "2027-01-15T08:00:00Z"})
    result = result_payload(record.identity(), state, 2, record.resumed_from)
    view = build_view(_facts("success", uri, record=record.to_dict(), result=result), history, now=NOW)
    assert view.progress == "finished" and view.stopped is None and view.deadlines == ()
    assert view.workload_state is not None and view.workload_state["phase"] == "succeeded"
    assert view.resume_from == f"{uri}/step-2/"
    assert view.latest is not None and view.latest.step == 5
    page = training_page(view)
    assert "refresh" not in page  # a finished run does not reload itself
    assert 'data-marker="resumed from" data-step="2"' in page
    assert 'data-marker="newest complete" data-step="5"' in page


def test_failed_shows_where_training_stopped_and_why(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 2, pending=True)
    record = _record()
    failed = WorkloadState("failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    outcome = outcome_record(1, "failed", failed, None, NOW - 5)
    ended = datetime.fromtimestamp(NOW - 5, UTC)
    facts = _facts("failed", uri, record=record.to_dict(), outcome=outcome, end_date=ended)
    view = build_view(facts, history, now=NOW)
    assert view.progress == "failed"
    assert view.stopped is not None
    assert view.stopped.startswith("training stopped after step 2 (epoch 2), committed ")
    assert "step 3 never completed" in view.stopped
    assert "BackoffLimitExceeded" in view.stopped and "backoff limit" in view.stopped
    assert view.workload_state == {
        "phase": "failed",
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
    }
    assert 'data-marker="stopped" data-step="2"' in training_page(view)


def test_a_phase_start_ahead_of_airflows_clock_never_shows_more_than_the_budget(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 1, pending=False)
    record = _record()
    trigger = {
        "deadlines": Deadlines.parse(run_timeout=3600).to_payload(),
        "task_started_at": record.submitted_at,
        "kubernetes_conn_id": "kubernetes_default",
    }
    # the cluster stamped the container start 0.3 s after Airflow's "now" (clock skew or a clock step)
    live = LiveStatus({"phase": "running", "reason": "", "message": ""}, "running", NOW + 0.3, NOW + 0.3)
    facts = _facts("deferred", uri, record=record.to_dict(), trigger=trigger)
    view = build_view(facts, history, now=NOW, live=live)
    assert {d.name: d.left_seconds for d in view.deadlines}["run_timeout"] == 3600.0


def test_a_deadline_outcome_names_the_deadline(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 1)
    running = WorkloadState("running")
    outcome = outcome_record(1, "deadline", running, "run_timeout", NOW)
    view = build_view(_facts("failed", uri, record=_record().to_dict(), outcome=outcome), history, now=NOW)
    assert view.stopped is not None and "; run_timeout expired" in view.stopped


def test_an_outcome_of_an_earlier_attempt_is_not_the_current_one(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 1)
    stale = outcome_record(1, "failed", WorkloadState("failed", "Evicted"), None, NOW - 900)
    facts = _facts("running", uri, record=_record(attempt=2).to_dict(), outcome=stale)
    view = build_view(facts, history, now=NOW)
    assert view.workload_state is None and view.stopped is None


def test_not_a_training_task_says_so(tmp_path: Path) -> None:
    facts = _facts("success", "", operator="CheckpointCheckOperator", rendered={})
    page = training_page(build_view(facts, None, now=NOW))
    assert "not a training task" in page and "<svg" not in page


def test_no_checkpoint_yet_is_a_note_not_an_empty_axis(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 0)
    svg = render_chart(build_view(_facts("running", uri), history, now=NOW).series)
    assert 'data-points="0"' in svg and "No committed checkpoint" in svg


def test_durations_read_like_a_clock() -> None:
    assert [duration(s) for s in (None, 12, 245, 3720, -190)] == [
        "-",
        "12s",
        "4m 05s",
        "1h 02m",
        "expired 3m 10s ago",
    ]


def _disrupted(pod: str, reason: str, started: str, at: str) -> Disruption:
    return Disruption("", pod, reason, "", at=at, started=started)


def test_disruptions_and_the_time_they_cost_are_shown_from_the_xcom(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 3)
    record = _record()
    state = WorkloadState("succeeded", "Completed", "", {"startTime": "2027-01-15T08:00:00Z"})
    result = result_payload(record.identity(), state, 1, None)
    result["disruptions"] = summary(
        [
            _disrupted("ft-a", "EvictionByEvictionAPI", "2027-01-15T08:00:00Z", "2027-01-15T08:01:00Z"),
            _disrupted("ft-b", "TerminationByKubelet", "2027-01-15T08:01:05Z", "2027-01-15T08:01:35Z"),
        ]
    )
    view = build_view(_facts("success", uri, record=record.to_dict(), result=result), history, now=NOW)
    assert view.disruptions is not None and view.disruptions["count"] == 2
    assert view.to_json()["disruptions"]["lost_seconds"] == 90.0
    page = training_page(view)
    assert (
        "<th>Disruptions</th><td>2 (lost 1m 30s): ft-a EvictionByEvictionAPI, ft-b TerminationByKubelet"
        in page
    )


def test_a_max_disruptions_failure_shows_the_count_and_why_it_stopped(tmp_path: Path) -> None:
    uri, history = _history(tmp_path, 1)
    outcome = outcome_record(1, "deadline", WorkloadState("running"), "max_disruptions", NOW)
    outcome["disruptions"] = summary(
        [_disrupted(f"ft-{n}", "PreemptionByScheduler", "", "") for n in range(6)]
    )
    facts = _facts("failed", uri, record=_record().to_dict(), outcome=outcome)
    view = build_view(facts, history, now=NOW)
    assert view.stopped is not None and "disrupted more often than max_disruptions allows" in view.stopped
    assert "<th>Disruptions</th><td>6: ft-0 PreemptionByScheduler" in training_page(view)


def test_a_task_without_disruption_figures_shows_no_row_and_a_malformed_one_is_ignored(
    tmp_path: Path,
) -> None:
    uri, history = _history(tmp_path, 1)
    record = _record()
    result = result_payload(record.identity(), WorkloadState("succeeded", "Completed"), 1, None)
    assert build_view(_facts("success", uri, result=result), history, now=NOW).disruptions is None
    result["disruptions"] = {"count": "<script>", "pods": "x"}
    view = build_view(_facts("success", uri, result=result), history, now=NOW)
    assert view.disruptions is None and "Disruptions" not in training_page(view)
