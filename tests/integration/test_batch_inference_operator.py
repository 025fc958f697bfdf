"""BatchInferenceCronJobOperator against the local cluster: idempotent apply, validation before any API call,
and a run-now Job that really scores the seeded batches with ``workloads.batch_predict``.

The operator runs as Airflow would run it (``serving_helpers.run_task``): ``execute`` (raising
``TaskDeferred``), the handed-over trigger revived from its serialized form and run to its event, then the
deferred method with that event.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.cron import TZ_IN_SCHEDULE_MESSAGE, next_schedule_time
from airflow_k8s_ml.operators.batch_inference import BatchInferenceCronJobOperator
from tests.integration.serving_helpers import context, first_event, run_task

pytest.importorskip("torch")

BATCH_CMD = ["python", "-m", "airflow_k8s_ml.workloads.batch_predict"]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("batch-seed")
    env = {k: v for k, v in os.environ.items() if k not in {"MODEL_URI", "INPUT_URI", "OUTPUT_URI"}}
    seed = [
        sys.executable,
        "-m",
        "airflow_k8s_ml.workloads.seed",
        "--base-model-uri",
        f"file://{root}/models",
    ]
    proc = subprocess.run(
        [*seed, "--input-uri", f"file://{root}/in", "--batches", "2", "--rows-per-batch", "20"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return {
        "model_uri": f"file://{root}/models/step-1/",
        "input_uri": f"file://{root}/in/",
        "root": str(root),
    }


def make(
    namespace: str, seeded: dict[str, str], out: Path, **overrides: Any
) -> BatchInferenceCronJobOperator:
    args: dict[str, Any] = {
        "task_id": "batch",
        "name": "digits-nightly",
        "namespace": namespace,
        "schedule": "30 2 * * *",
        "time_zone": "Europe/Berlin",
        "model_uri": {"uri": seeded["model_uri"], "step": 1},
        "input_uri": seeded["input_uri"],
        "output_uri": f"file://{out}/",
        "image": "python:3.11",
        "command": BATCH_CMD,
        "starting_deadline_seconds": 300,
    }
    return BatchInferenceCronJobOperator(**{**args, **overrides})


@pytest.mark.usefixtures("kube_conn")
def test_cronjob_is_applied_idempotently_and_updated_in_place(
    namespace: str, api_client: Any, seeded: dict[str, str], tmp_path: Path
) -> None:
    from kubernetes import client

    batch = client.BatchV1Api(api_client)
    before = datetime.now(UTC)
    first = make(namespace, seeded, tmp_path).execute(context("batch"))
    assert first["action"] == "created" and first["cronjob"] == "digits-nightly"
    expected_next = next_schedule_time("30 2 * * *", "Europe/Berlin", before)
    assert first["next_schedule_time"] == expected_next.isoformat()  # type: ignore[union-attr]
    live = batch.read_namespaced_cron_job("digits-nightly", namespace)
    assert live.spec.concurrency_policy == "Forbid" and live.spec.time_zone == "Europe/Berlin"
    assert live.spec.starting_deadline_seconds == 300
    env = {e.name: e.value for e in live.spec.job_template.spec.template.spec.containers[0].env}
    assert env["MODEL_URI"] == seeded["model_uri"] and env["OUTPUT_URI"] == f"file://{tmp_path}/"

    second = make(namespace, seeded, tmp_path).execute(context("batch"))
    assert second["action"] == "unchanged" and second["uid"] == first["uid"]

    third = make(namespace, seeded, tmp_path, schedule="0 4 * * *", suspend=True).execute(context("batch"))
    assert third["action"] == "configured" and third["uid"] == first["uid"]
    assert third["next_schedule_time"] is None and third["suspend"] is True
    assert batch.read_namespaced_cron_job("digits-nightly", namespace).spec.schedule == "0 4 * * *"


@pytest.mark.usefixtures("kube_conn")
def test_tz_in_schedule_fails_before_any_api_call_with_the_api_servers_message(
    namespace: str, api_client: Any, seeded: dict[str, str], tmp_path: Path
) -> None:
    from kubernetes import client

    batch = client.BatchV1Api(api_client)
    op = make(namespace, seeded, tmp_path, schedule="{{ params.schedule }}")
    op.schedule = "TZ=Europe/Berlin 30 2 * * *"  # what the template renders to
    with pytest.raises(ValidationError) as info:
        op.execute(context("batch"))
    assert info.value.field == "schedule" and info.value.message == TZ_IN_SCHEDULE_MESSAGE
    assert batch.list_namespaced_cron_job(namespace).items == []

    # The API server says the same words about the same schedule.
    body = {
        "metadata": {"name": "direct"},
        "spec": {
            "schedule": "TZ=Europe/Berlin 30 2 * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "python:3.11"}],
                        }
                    }
                }
            },
        },
    }
    with pytest.raises(client.ApiException) as rejected:
        batch.create_namespaced_cron_job(namespace, body)
    causes = json.loads(rejected.value.body)["details"]["causes"]
    assert any(c["message"].endswith(TZ_IN_SCHEDULE_MESSAGE) for c in causes), causes


@pytest.mark.usefixtures("kube_conn")
def test_run_now_creates_a_manual_job_like_kubectl_and_returns_its_result(
    namespace: str, api_client: Any, seeded: dict[str, str], tmp_path: Path
) -> None:
    from kubernetes import client

    # defer_after=0: the run-now Job is waited for by the trigger (the worker's follow: the tests below)
    op = make(namespace, seeded, tmp_path, run_now=True, run_timeout=90, startup_timeout=30, defer_after=0)
    result = run_task(op, context("batch"), timeout=90, kind="Job")

    job = result["manual_job"]
    assert result["action"] == "created" and result["next_schedule_time"]
    assert job["state"]["phase"] == "succeeded" and job["output_uri"] == f"file://{tmp_path}/"
    assert job["name"].startswith("digits-nightly-manual-")
    summary = json.loads((tmp_path / "_SUMMARY.json").read_text())
    assert summary["count"] == 40 and summary["model_uri"] == seeded["model_uri"]

    live = client.BatchV1Api(api_client).read_namespaced_job(job["name"], namespace)
    cronjob = client.BatchV1Api(api_client).read_namespaced_cron_job("digits-nightly", namespace)
    assert live.metadata.annotations["cronjob.kubernetes.io/instantiate"] == "manual"
    owner = live.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "CronJob",
        "digits-nightly",
        cronjob.metadata.uid,
        True,
    )
    assert live.metadata.labels["airflow-k8s-ml/attempt"] == "1"

    # A retry of the same task instance returns the succeeded Job's result instead of running it again.
    again = make(namespace, seeded, tmp_path, run_now=True).execute(context("batch", try_number=2))
    assert again["action"] == "unchanged" and again["manual_job"]["name"] == job["name"]


def _done_lines(log: str) -> list[str]:
    """The scoring pod's last line (``[<pod>] done count=...``) each time the task log holds it."""
    return re.findall(r"\[[^\]]+\] done count=\d+ ", log)


@pytest.mark.usefixtures("kube_conn")
def test_a_short_run_now_job_ends_in_the_worker_without_deferring_and_logs_its_lines_once(
    namespace: str, seeded: dict[str, str], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # a follow longer than the Job on a loaded machine (the default, 30 s: the parse test below)
    op = make(namespace, seeded, tmp_path, run_now=True, run_timeout=90, defer_after=90)
    capfd.readouterr()
    result = op.execute(context("batch"))  # returns: no TaskDeferred, no trigger
    log = "".join(capfd.readouterr())
    assert result["manual_job"]["state"]["phase"] == "succeeded", result
    assert json.loads((tmp_path / "_SUMMARY.json").read_text())["count"] == 40
    assert len(_done_lines(log)) == 1, log  # the pod's lines, logged by the worker once it ended
    assert "deferring to the triggerer" not in log


@pytest.mark.usefixtures("kube_conn")
def test_a_run_now_job_longer_than_defer_after_is_handed_to_the_trigger_which_relays_every_line(
    namespace: str, seeded: dict[str, str], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    op = make(namespace, seeded, tmp_path, run_now=True, run_timeout=90, defer_after=0.2)
    capfd.readouterr()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context("batch"))
    worker = "".join(capfd.readouterr())
    assert "still running after 0.2s; deferring to the triggerer" in worker
    assert _done_lines(worker) == []  # the worker logged no pod line: the trigger relays from the first
    classpath, kwargs = deferred.value.trigger.serialize()
    assert classpath.endswith("WorkloadTrigger") and kwargs["stream_logs"] is True
    payload = asyncio.run(first_event(type(deferred.value.trigger)(**kwargs), 90))
    method = getattr(op, deferred.value.method_name)
    result = method(context("batch"), event=payload, **(deferred.value.kwargs or {}))
    relayed = "".join(capfd.readouterr())
    assert result["manual_job"]["state"]["phase"] == "succeeded", result
    assert len(_done_lines(relayed)) == 1, relayed


def test_defer_after_is_checked_when_the_dag_is_parsed(seeded: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="defer_after"):
        make("default", seeded, tmp_path, run_now=True, defer_after=-1)
    assert make("default", seeded, tmp_path).defer_after == 30.0  # as InferenceDeploymentOperator's
    assert make("default", seeded, tmp_path, defer_after=0).defer_after == 0.0


@pytest.mark.usefixtures("kube_conn")
def test_a_kill_while_the_worker_follows_deletes_the_run_now_job_and_fails_naming_the_kill(
    namespace: str, seeded: dict[str, str], tmp_path: Path, core: Any, batch: Any
) -> None:
    """Airflow's SIGTERM handler calls ``on_kill`` while the worker follows the run-now Job: the Job is
    deleted, the follow ends with the deletion (not at ``defer_after``), and the task fails naming the kill
    instead of deferring a killed task."""
    from airflow_k8s_ml.errors import TaskKilled
    from tests.cluster_fixtures import sigterm_when, wait_for

    sleeper = ["python", "-c", "import time; time.sleep(120)"]
    op = make(namespace, seeded, tmp_path, run_now=True, command=sleeper, defer_after=600)

    def running() -> bool:
        return any(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items)

    with (
        sigterm_when(op, running, "the run-now Job's pod running") as sent,
        pytest.raises(TaskKilled, match="was deleted by the task's on_kill"),
    ):
        op.execute(context("batch"))
    ended = time.monotonic()
    assert sent, "no SIGTERM was sent"
    assert ended - sent[0] < 60, (
        f"the follow went on {ended - sent[0]:.0f} s after the kill (defer_after 600 s)"
    )
    wait_for(lambda: not batch.list_namespaced_job(namespace).items, timeout=30, what="the killed Job gone")
    assert batch.read_namespaced_cron_job("digits-nightly", namespace)  # the CronJob stays
