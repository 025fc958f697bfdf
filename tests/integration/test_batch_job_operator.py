"""BatchInferenceJobOperator against the local cluster: a real Job runs ``workloads.batch_predict`` on a model
trained by ``workloads.seed``, over ``file://`` URIs, the whole task life as Airflow runs it (render ->
execute -> TaskDeferred -> the revived trigger -> execute_complete).

Covers: per-run output folders from a templated ``output_uri`` (a backfilled date writes its own folder), the
predictions and ``_SUMMARY.json`` written, the injected env and security context on the live Job, the XCom
(training result + ``output_uri``), a retry after success returning the result without a second Job (from
the task state store, and from the run labels alone), a failing batch reported with the workload's own
error line, and a bad rendered URI refused before anything is created.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError, WorkloadFailed
from airflow_k8s_ml.operators import BatchInferenceJobOperator

from .training_helpers import jobs, make_context, run_task

pytest.importorskip("torch")

URI_VARS = ("MODEL_URI", "INPUT_URI", "OUTPUT_URI")


#: Every test runs with ``kubernetes_default`` pointing at the shared test cluster.
pytestmark = pytest.mark.usefixtures("kube_conn")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A tiny trained model (checkpoint ``step-1``) and two labelled batch files, as ``docs/workloads.md``
    describes for ``workloads.seed``."""
    root = tmp_path_factory.mktemp("batch-job-seed")
    env = {k: v for k, v in os.environ.items() if k not in URI_VARS}
    command = [
        sys.executable,
        "-m",
        "airflow_k8s_ml.workloads.seed",
        "--base-model-uri",
        f"file://{root}/base",
    ]
    command += ["--input-uri", f"file://{root}/in", "--batches", "2", "--rows-per-batch", "20"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (root / "empty").mkdir()
    return {
        "model_uri": f"file://{root}/base/step-1/",
        "input_uri": f"file://{root}/in/",
        "empty_uri": f"file://{root}/empty/",
    }


def score(
    namespace: str, seeded: dict[str, str], output_uri: str, **kwargs: Any
) -> BatchInferenceJobOperator:
    args: dict[str, Any] = {
        "task_id": "score",
        "namespace": namespace,
        "image": "python:3.11",
        "model_uri": {"uri": seeded["model_uri"], "step": 1},  # the checkpoint gate's XCom
        "input_uri": seeded["input_uri"],
        "output_uri": output_uri,
        "startup_timeout": 30,
        "run_timeout": 60,
        "pod_options": {"termination_grace_period_seconds": 2},
    }
    return BatchInferenceJobOperator(**{**args, **kwargs})


def dag_run(day: str, **kwargs: Any) -> dict[str, Any]:
    """The context of the ``score`` task in the DAG run of ``day`` (YYYY-MM-DD), with the date macros."""
    context = make_context("score", dag_id="nightly", run_id=f"scheduled__{day}T00:00:00+00:00", **kwargs)
    return {**context, "ds": day, "ds_nodash": day.replace("-", ""), "params": {}}


def rendered(op: BatchInferenceJobOperator, context: dict[str, Any]) -> BatchInferenceJobOperator:
    op.render_template_fields(context)  # type: ignore[arg-type]  # what the task runner does before execute
    return op


def test_each_run_scores_into_its_own_folder_and_a_retry_reuses_the_result(
    batch: Any, namespace: str, seeded: dict[str, str], tmp_path: Path
) -> None:
    output = f"file://{tmp_path}/predictions/{{{{ ds_nodash }}}}/"
    context = dag_run("2024-05-01")
    result = run_task(rendered(score(namespace, seeded, output), context), context)

    folder = tmp_path / "predictions" / "20240501"
    assert result["output_uri"] == f"file://{folder}/"
    assert result["kind"] == "Job" and result["state"]["phase"] == "succeeded" and result["attempts"] == 1
    assert result["name"].startswith("nightly-score-") and result["duration_seconds"] >= 0
    assert sorted(p.name for p in folder.glob("predictions-*.jsonl")) == [
        "predictions-batch-000.jsonl",
        "predictions-batch-001.jsonl",
    ]
    summary = json.loads((folder / "_SUMMARY.json").read_text())
    assert summary["count"] == 40 and summary["model_step"] == 1
    assert (summary["model_uri"], summary["output_uri"]) == (seeded["model_uri"], f"file://{folder}/")

    [job] = jobs(batch, namespace)
    pod = job.spec.template.spec
    env = {e.name: e.value for e in pod.containers[0].env}
    assert [env[var] for var in URI_VARS] == [seeded["model_uri"], seeded["input_uri"], f"file://{folder}/"]
    assert pod.containers[0].command == ["python", "-m", "airflow_k8s_ml.workloads.batch_predict"]
    assert pod.security_context.run_as_non_root is True
    assert pod.containers[0].security_context.allow_privilege_escalation is False
    assert job.metadata.labels["airflow-k8s-ml/task-id"] == "score"

    # A retry of the same task instance: the cached result, no second Job, the batch not rewritten.
    retry_context = dag_run("2024-05-01", store=context["task_state_store"], try_number=2)
    again = run_task(rendered(score(namespace, seeded, output), retry_context), retry_context)
    assert again == result
    # The same with the task state store lost: the run labels find the succeeded Job.
    relabel_context = dag_run("2024-05-01", try_number=2)
    rebuilt = run_task(rendered(score(namespace, seeded, output), relabel_context), relabel_context)
    assert (rebuilt["uid"], rebuilt["output_uri"], rebuilt["state"]["phase"]) == (
        result["uid"],
        result["output_uri"],
        "succeeded",
    )
    assert len(jobs(batch, namespace)) == 1
    assert json.loads((folder / "_SUMMARY.json").read_text())["started_at"] == summary["started_at"]

    # A backfill of another date is another DAG run: its own Job, its own folder.
    backfill = dag_run("2024-04-30")
    earlier = run_task(rendered(score(namespace, seeded, output), backfill), backfill)
    assert (
        earlier["output_uri"] == f"file://{tmp_path}/predictions/20240430/"
        and earlier["uid"] != result["uid"]
    )
    assert json.loads((tmp_path / "predictions" / "20240430" / "_SUMMARY.json").read_text())["count"] == 40
    assert len(jobs(batch, namespace)) == 2


def test_a_failing_batch_fails_the_task_with_the_workloads_error(
    batch: Any, namespace: str, seeded: dict[str, str], tmp_path: Path
) -> None:
    op = score(namespace, seeded, f"file://{tmp_path}/out/", input_uri=seeded["empty_uri"])
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, dag_run("2024-05-01"))
    message = str(info.value)
    assert "BackoffLimitExceeded" in message and "exit code 2" in message
    assert "no batch files" in message
    assert not (tmp_path / "out" / "_SUMMARY.json").exists()
    assert len(jobs(batch, namespace)) == 1  # backoff_limit 0: Airflow's retry would be the next attempt


def test_a_bad_rendered_uri_fails_before_anything_is_created(
    batch: Any, namespace: str, seeded: dict[str, str]
) -> None:
    op = score(namespace, seeded, "{{ params.output }}")
    context = {**dag_run("2024-05-01"), "params": {"output": "gs://predictions/20240501/"}}
    with pytest.raises(ValidationError) as info:
        rendered(op, context).execute(context)  # type: ignore[arg-type]
    assert info.value.field == "output_uri" and "gs://predictions/20240501/" in info.value.message
    assert jobs(batch, namespace) == []
