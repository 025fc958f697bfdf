"""The shipped nightly DAG file: cheap to parse, no surprise run on unpause, no logical date assumed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> object:
    sys.path.insert(0, str(REPO / "dags"))
    try:
        import nightly_finetune

        return nightly_finetune
    finally:
        sys.path.remove(str(REPO / "dags"))


def test_dag_file_parses_without_heavy_imports() -> None:
    code = (
        "import sys; sys.path.insert(0, 'dags'); import nightly_finetune; "
        "heavy = [m for m in ('kubernetes', 'kubernetes_asyncio', 'boto3', 'botocore', 'torch') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_unpausing_waits_for_the_next_scheduled_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import pendulum
    from airflow.timetables import trigger
    from airflow.timetables.base import TimeRestriction
    from airflow.timetables.trigger import CronTriggerTimetable

    dag = _load().dag  # type: ignore[attr-defined]
    shipped = dag.timetable
    assert dag.start_date is None and dag.catchup is False
    core = CronTriggerTimetable(
        shipped.expression, timezone=shipped.timezone, run_immediately=shipped.run_immediately
    )
    restriction = TimeRestriction(earliest=None, latest=None, catchup=False)
    # whenever the DAG is unpaused, even minutes after a 01:30: the first run is the next 01:30
    slot = pendulum.datetime(2026, 12, 2, 1, 30, tz="Europe/Amsterdam")
    for minutes_after_slot in (1, 20, 60 * 23):
        now = slot.add(minutes=minutes_after_slot).in_tz("UTC")
        monkeypatch.setattr(trigger, "utcnow", lambda now=now: now)  # the clock the timetable reads
        info = core.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
        assert info is not None and info.run_after == slot.add(days=1), minutes_after_slot


def test_templates_do_not_need_a_logical_date() -> None:
    source = (REPO / "dags" / "nightly_finetune.py").read_text()
    dated_names = r"(?:ds|ts|ds_nodash|ts_nodash|logical_date|execution_date|data_interval_\w+)"
    dated = re.findall(r"\{\{\s*" + dated_names + r"\b", source)
    assert dated == []
    dag = _load().dag  # type: ignore[attr-defined]
    folder = dag.user_defined_filters["run_folder"]
    assert folder("manual__2026-12-01T01:30:00.123+00:00") == "manual__2026-12-01T01-30-00.123-00-00"


def test_queue_param_reaches_every_training_task_and_defaults_to_not_queued() -> None:
    dag = _load().dag  # type: ignore[attr-defined]
    assert dag.params["queue"] == ""
    for task_id in ("fine_tune_job", "fine_tune_pytorchjob", "fine_tune_trainjob"):
        task = dag.get_task(task_id)
        assert task.queue_name == "{{ params.queue }}" and "queue_name" in task.template_fields
        for queue, queued in (("gpu", "gpu"), ("", None)):
            args = type(task)._arguments  # the arguments as read after rendering
            task.queue_name = queue
            assert args(task, task.manifest).queue_name == queued, (task_id, queue)


@pytest.mark.parametrize(
    ("params", "canary", "hpa_metrics"),
    [
        ({"canary_percent": 0, "autoscale_metric": "cpu"}, None, ["Resource"]),
        ({"canary_percent": 20, "autoscale_metric": "rps"}, 20, ["Pods"]),
    ],
)
def test_canary_and_autoscaling_params_reach_the_deploy_task(
    params: dict[str, object], canary: int | None, hpa_metrics: list[str]
) -> None:
    """Rendered as Airflow renders the task's templated fields: 0 is no canary, a share is a canary; the
    metric Param picks the HPA's target (a CPU Resource metric or the Pods rps metric)."""
    from airflow_k8s_ml.manifests.serving import build_hpa
    from airflow_k8s_ml.manifests.serving_rules import check_canary_fields
    from airflow_k8s_ml.operators._serving import inference_spec

    dag = _load().dag  # type: ignore[attr-defined]
    assert {key: dag.params[key] for key in params} == {"canary_percent": 0, "autoscale_metric": "cpu"}
    task = dag.get_task("deploy_model")
    assert {"canary", "autoscaling"} <= set(task.template_fields)
    context = {"params": params}
    settings = check_canary_fields(task.render_template(task.canary, context))
    assert (settings["percent"] if settings else None) == canary
    rendered = task._arguments()._replace(  # the arguments as read after rendering (the task is not changed)
        autoscaling=task.render_template(task.autoscaling, context), model_uri="s3://models/step-1/"
    )
    spec = inference_spec(rendered)
    hpa = build_hpa(spec, "digits", "ml")
    assert hpa is not None and [m["type"] for m in hpa["spec"]["metrics"]] == hpa_metrics
