"""``TrainJobOperator``: a Kubeflow Trainer v2 TrainJob of two nodes on the ``torch-distributed`` runtime.

The Trainer controller renders it into a JobSet, one pod per node, with the ``PET_*`` variables torchrun
reads (``PET_NNODES``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``); the task log prefixes lines ``[node-0]``,
``[node-1]``. Needs Kubeflow Trainer on a real cluster; the local cluster serves ``trainer.kubeflow.org``.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG

from airflow_k8s_ml.operators import TrainJobOperator

#: Stands for ``torchrun train.py``: say which node this is.
HELLO = "import os; print('node', os.environ['PET_NODE_RANK'], 'of', os.environ['PET_NNODES'], flush=True)"

with DAG("example_trainjob", schedule=None, tags=["example"]):
    TrainJobOperator(
        task_id="train",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", HELLO],
        num_nodes=2,
        resources_per_node={"cpu": 1, "memory": "1Gi"},  # the Kubeflow SDK's shape, per node
        run_timeout=timedelta(minutes=10),
    )
