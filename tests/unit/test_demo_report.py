"""The demo summary's split of a task's time into worker and triggerer, from a recorded task log."""

from __future__ import annotations

from airflow_k8s_ml.testbed.demo_report import split_worker_and_triggerer


def entry(stamp: str, event: str, logger: str = "task") -> dict[str, str]:
    return {"timestamp": f"2026-12-01T23:44:{stamp}Z", "event": event, "logger": logger}


# A deferrable task as Airflow 3.3 logs it: worker, "Pausing task as DEFERRED.", trigger lines from the
# triggerer's log file merged in, the resumed execution's "Pre Execute" group, the finish.
RECORDED = [
    entry("50.000", "::group::Pre Execute"),
    entry("50.500", "created Job ml/x", "airflow.task.operators.FineTuneJobOperator"),
    entry("51.000", "Pausing task as DEFERRED. "),
    entry("51.020", "::endgroup::"),
    entry("53.000", "trigger starting", "airflow.triggers"),
    entry("55.000", "[x-0] epoch=1/5", "airflow.triggers"),
    entry("59.000", "::group::Pre Execute"),
    entry("59.900", "Job ml/x succeeded", "airflow.task.operators.FineTuneJobOperator"),
    entry("59.950", "::endgroup::"),
]


def test_deferral_runs_from_pausing_to_the_resumed_pre_execute() -> None:
    worker, deferred = split_worker_and_triggerer(RECORDED, None)
    assert round(deferred, 3) == 8.0
    assert round(worker, 3) == 1.95


def test_a_task_that_never_defers_is_all_worker_time() -> None:
    worker, deferred = split_worker_and_triggerer([RECORDED[0], RECORDED[1]], None)
    assert (round(worker, 3), deferred) == (0.5, 0.0)


def test_still_deferred_at_the_end_counts_until_the_end() -> None:
    from datetime import datetime

    ended = datetime.fromisoformat("2026-12-01T23:45:01+00:00").timestamp()  # e.g. marked failed
    worker, deferred = split_worker_and_triggerer(RECORDED[:6], ended)
    assert (round(worker, 3), round(deferred, 3)) == (1.0, 10.0)


def test_the_summary_names_the_training_tab() -> None:
    from airflow_k8s_ml.plugin_paths import training_path
    from airflow_k8s_ml.testbed.demo_report import render

    url = training_path(
        "nightly_finetune",
        "manual__2026-12-01T01:30:00+00:00",
        "fine_tune_job",
        root="http://127.0.0.1:8080/",
    )
    assert url == (
        "http://127.0.0.1:8080/airflow-k8s-ml/training?dag_id=nightly_finetune"
        "&run_id=manual__2026-12-01T01%3A30%3A00%2B00%3A00&task_id=fine_tune_job&map_index=-1"
    )
    assert f"(Training tab): {url}" in render({"training_tab": url})


class _Rest:
    """Answers the logs endpoint as the API server does for a try it has no record of (or fails)."""

    def __init__(self, status: int) -> None:
        self.status = status

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[dict[str, str]]:
        from airflow_k8s_ml.testbed.airflow_rest import RestError

        if try_number == 1:
            raise RestError("GET", "/logs/1", self.status, '{"detail":"TaskInstance not found"}')
        return list(RECORDED)


def test_a_try_the_api_server_has_no_record_of_counts_no_time() -> None:
    from airflow_k8s_ml.testbed.demo_report import _try_log

    assert _try_log(_Rest(404), "d", "r", "t", 1) == []  # type: ignore[arg-type]
    assert _try_log(_Rest(404), "d", "r", "t", 2) == RECORDED  # type: ignore[arg-type]


def test_other_api_errors_still_fail_the_summary() -> None:
    import pytest

    from airflow_k8s_ml.testbed.airflow_rest import RestError
    from airflow_k8s_ml.testbed.demo_report import _try_log

    with pytest.raises(RestError, match="HTTP 500"):
        _try_log(_Rest(500), "d", "r", "t", 1)  # type: ignore[arg-type]


def test_a_queued_training_shows_its_admission_time() -> None:
    from airflow_k8s_ml.testbed.demo_report import render

    training = {"kind": "Job", "namespace": "ml", "name": "ft", "state": {"phase": "succeeded"}}
    assert "admitted by Kueue" not in render({"training": training})
    queued = render({"training": {**training, "admitted_at": "2026-12-02T06:20:33Z"}})
    assert "training admitted by Kueue at 2026-12-02T06:20:33Z" in queued
