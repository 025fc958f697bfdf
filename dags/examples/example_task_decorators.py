"""``@task.finetune_job``, ``@task.pytorch_job`` and ``@task.train_job``: a Python function as the program.

The function runs inside the workload's pod(s) (the image needs Python and whatever the function imports;
import inside the function, as with ``@task.kubernetes``), and what it returns is the task's XCom, so the
next task takes it as an argument. The decorators take every argument of ``FineTuneJobOperator`` /
``PyTorchJobOperator`` / ``TrainJobOperator`` (deadlines, resources, GPUs, queue, checkpoints and resume)
but ``command``, ``args`` and ``manifest``. A parameter named ``resume_from`` or ``checkpoint_uri`` gets
the resolved value.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, task

from airflow_k8s_ml.checkpoints import run_folder

with DAG(
    "example_task_decorators",
    schedule=None,
    tags=["example"],
    user_defined_filters={"run_folder": run_folder},
):

    @task.finetune_job(
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",  # your training image
        env_from=["s3-credentials"],  # the pod's S3 endpoint and keys
        requests={"cpu": "1", "memory": "1Gi"},
        checkpoint_uri="s3://examples/decorated/{{ run_id | run_folder }}",
        resume_from="latest",  # a retry starts after the newest complete checkpoint
        run_timeout=timedelta(minutes=2),
        retries=1,
    )
    def train(steps: int, checkpoint_uri: str | None = None, resume_from: str | None = None) -> dict:
        import json

        from airflow_k8s_ml.checkpoints import CheckpointWriter

        writer = CheckpointWriter(checkpoint_uri)
        start = int(resume_from.rstrip("/").rsplit("step-", 1)[1]) if resume_from else 0
        for step in range(start + 1, steps + 1):
            uri = writer.commit(
                step,
                {"weights.json": json.dumps({"w": step}).encode()},
                metrics={"val_accuracy": 0.5 + 0.1 * step},
            )
            print(f"step={step} committed {uri}", flush=True)
        return {"checkpoint": uri, "steps": steps}

    @task.pytorch_job(image="ghcr.io/airflow-k8s-ml/workloads:0.1.0", workers=1, run_timeout=120)
    def evaluate(trained: dict) -> float:
        import os

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        print(f"rank {rank} of {world} evaluates {trained['checkpoint']}", flush=True)
        return 0.8  # rank 0's value is the XCom

    # A Kubeflow Trainer v2 TrainJob: every node runs the function (PET_* in its env); node-0's value is
    # the XCom.
    @task.train_job(image="ghcr.io/airflow-k8s-ml/workloads:0.1.0", num_nodes=2, run_timeout=120)
    def calibrate(trained: dict) -> int:
        import os

        node, nodes = int(os.environ["PET_NODE_RANK"]), int(os.environ["PET_NNODES"])
        print(f"node {node} of {nodes} calibrates step {trained['steps']}", flush=True)
        return trained["steps"]

    @task
    def report(accuracy: float, calibrated: int) -> None:
        print(f"decorated pipeline done: val_accuracy={accuracy} calibrated={calibrated}")

    trained = train(3)
    report(evaluate(trained), calibrate(trained))
