"""Stuck pods under real Airflow components: the deferred task's trigger runs in the real triggerer, which
names the stuck pod in the task log (as the UI shows it) within 30 s, and the run fails at its budget with
the cause in the message and nothing left on the cluster."""

from __future__ import annotations

import time

import pytest

from tests.production.conftest import Production, wait_until
from tests.production.dags.stuck_pods import UNPULLABLE

GPU_MESSAGE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def _stuck_line(production: Production, dag_id: str, run_id: str) -> str | None:
    lines = production.log_lines(dag_id, run_id, "train", 1)
    return next((line for line in lines if " is stuck: " in line), None)


@pytest.mark.parametrize(
    ("dag_id", "cause", "budget"),
    [
        ("stuck_unschedulable", f"Unschedulable: {GPU_MESSAGE}", "admission_timeout 45s exceeded"),
        ("stuck_image_pull", f'Failed to pull image "{UNPULLABLE}"', "startup_timeout 45s exceeded"),
    ],
)
def test_the_triggerer_names_a_stuck_pod_then_the_budget_ends_it(
    production: Production, dag_id: str, cause: str, budget: str
) -> None:
    run_id = production.rest.trigger(dag_id)
    production.rest.wait_task_state(dag_id, run_id, "train", {"deferred"}, timeout=120)
    deferred_at = time.monotonic()
    line = wait_until("the stuck line in the task log", lambda: _stuck_line(production, dag_id, run_id), 30)
    assert time.monotonic() - deferred_at < 30
    assert cause in line or (dag_id == "stuck_image_pull" and UNPULLABLE in line), line
    run = production.rest.wait_run(dag_id, run_id, timeout=180)
    assert run["state"] == "failed"
    log = "\n".join(production.log_lines(dag_id, run_id, "train", 1))
    assert budget in log
    jobs = production.batch().list_namespaced_job("ml", label_selector=f"airflow-k8s-ml/dag-id={dag_id}")
    assert jobs.items == []
