"""dags/queued_gpu_training.py (``make demo-queue``): two runs may be active at once, each asking for one GPU
through the LocalQueue its ``queue`` Param names, so a one-GPU quota makes them compete."""

from __future__ import annotations

import runpy
from pathlib import Path

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "queued_gpu_training.py"


def test_two_runs_may_compete_each_for_one_queued_gpu() -> None:
    dag = runpy.run_path(str(DAG_FILE))["dag"]
    assert dag.dag_id == "queued_gpu_training" and dag.max_active_runs == 2
    task = dag.get_task("train")
    assert task.gpus == 1 and task.queue_name == "{{ params.queue }}"
    assert dag.params["queue"] == "user-queue"
    assert task.admission_timeout is not None
