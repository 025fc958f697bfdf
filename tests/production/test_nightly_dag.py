"""The shipped nightly DAG under a real scheduler, triggerer and API server, in its three training modes.

Job mode is triggered through the REST API with ``logical_date: null``, PyTorchJob and TrainJob modes with
``airflow dags trigger`` (Airflow 3 gives no run a logical date). Then a succeeded ``deploy_model`` is
cleared through the REST API, as a user would from the UI: it must succeed again without a write.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.production.conftest import Production, epoch_lines

DAG = "nightly_finetune"
SMALL = {"epochs": 3, "max_train_samples": 600, "accuracy_threshold": 0.5}


def _states(production: Production, run_id: str) -> dict[str, str]:
    return {ti["task_id"]: ti["state"] for ti in production.rest.task_instances(DAG, run_id)}


@pytest.fixture(scope="module")
def job_run(production: Production) -> dict[str, Any]:
    run_id = production.rest.trigger(DAG, SMALL)
    run = production.rest.wait_run(DAG, run_id, timeout=600)
    return {"run": run, "run_id": run_id}


def test_job_mode_triggered_by_rest_without_logical_date(
    production: Production, job_run: dict[str, Any]
) -> None:
    run, run_id = job_run["run"], job_run["run_id"]
    assert run["logical_date"] is None
    assert run["state"] == "success", _states(production, run_id)
    assert _states(production, run_id) == {
        "choose_training_mode": "success",
        "fine_tune_job": "success",
        "fine_tune_pytorchjob": "skipped",
        "fine_tune_trainjob": "skipped",
        "checkpoint_gate": "success",
        "should_deploy": "success",
        "deploy_model": "success",
        "batch_inference": "success",
    }
    gate = production.rest.xcom(DAG, run_id, "checkpoint_gate")
    assert gate["step"] == 3 and "/checkpoints/nightly/manual__" in gate["uri"]
    # every training line relayed into the task log exactly once, in order
    lines = production.log_lines(DAG, run_id, "fine_tune_job", 1)
    assert epoch_lines(lines) == ["epoch=1/3", "epoch=2/3", "epoch=3/3"]


def test_clearing_a_succeeded_deploy_writes_nothing(production: Production, job_run: dict[str, Any]) -> None:
    run_id = job_run["run_id"]
    deployment = production.apps().read_namespaced_deployment("digits", "ml")
    before = production.rest.xcom(DAG, run_id, "deploy_model")
    production.rest.clear_task(DAG, run_id, "deploy_model")
    production.rest.wait_task_state(DAG, run_id, "deploy_model", {"success", "failed"}, timeout=300)
    after_ti = production.rest.task_instance(DAG, run_id, "deploy_model")
    assert after_ti["state"] == "success" and after_ti["try_number"] == 2
    again = production.apps().read_namespaced_deployment("digits", "ml")
    after = production.rest.xcom(DAG, run_id, "deploy_model")
    assert after["revision"] == before["revision"]
    assert again.metadata.resource_version == deployment.metadata.resource_version  # no write at all
    assert again.metadata.generation == deployment.metadata.generation


def test_pytorchjob_mode_triggered_by_cli(production: Production, job_run: dict[str, Any]) -> None:
    conf = json.dumps({**SMALL, "mode": "pytorchjob", "workers": 1, "epochs": 2})
    run_id = production.cli_trigger(DAG, conf)
    run = production.rest.wait_run(DAG, run_id, timeout=900)
    states = _states(production, run_id)
    assert run["logical_date"] is None
    assert run["state"] == "success", states
    assert states["fine_tune_pytorchjob"] == "success" and states["fine_tune_job"] == "skipped"
    training = production.rest.xcom(DAG, run_id, "fine_tune_pytorchjob")
    assert training["kind"] == "PyTorchJob"
    lines = production.log_lines(DAG, run_id, "fine_tune_pytorchjob", 1)
    master = [line for line in lines if line.startswith("[master-0]")]
    try_number = production.rest.task_instance(DAG, run_id, "fine_tune_pytorchjob")["try_number"]
    assert epoch_lines(master) == ["epoch=1/2", "epoch=2/2"], (try_number, lines)


def test_trainjob_mode_triggered_by_cli(production: Production, job_run: dict[str, Any]) -> None:
    conf = json.dumps({**SMALL, "mode": "trainjob", "workers": 2, "epochs": 2})
    run_id = production.cli_trigger(DAG, conf)
    run = production.rest.wait_run(DAG, run_id, timeout=900)
    states = _states(production, run_id)
    assert run["state"] == "success", states
    assert states["fine_tune_trainjob"] == "success" and states["fine_tune_pytorchjob"] == "skipped"
    training = production.rest.xcom(DAG, run_id, "fine_tune_trainjob")
    assert training["kind"] == "TrainJob"
    lines = production.log_lines(DAG, run_id, "fine_tune_trainjob", 1)
    assert epoch_lines([line for line in lines if line.startswith("[node-0]")]) == ["epoch=1/2", "epoch=2/2"]
    assert any(line.startswith("[node-1] finetune start world_size=2 rank=1 ") for line in lines)
