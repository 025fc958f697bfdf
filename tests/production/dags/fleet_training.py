"""Training tasks side by side for the HA stack's fleet faults: N independent tasks in one DAG run, each one
short training Job printing ``epoch=K/N`` once a second, so their triggers spread over both triggerers and
a triggerer can be killed while every one of them is relaying lines.

``fleet_training`` has :data:`FLEET` tasks (the default suite); ``fleet_training_large`` has
:data:`FLEET_LARGE` (the ``slow`` variant). Task ids are ``train_0``, ``train_1``...
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG

from airflow_k8s_ml.operators import FineTuneJobOperator

FLEET = 8
FLEET_LARGE = 20
EPOCHS = 40
TRAIN = (
    "import time\n"
    f"for k in range(1, {EPOCHS} + 1):\n"
    f"    print(f'epoch={{k}}/{EPOCHS} loss={{1.0 / k:.4f}}', flush=True)\n"
    "    time.sleep(1.0)\n"
    "print('training done', flush=True)\n"
)

for dag_id, size in (("fleet_training", FLEET), ("fleet_training_large", FLEET_LARGE)):
    with DAG(dag_id, schedule=None, max_active_runs=2, max_active_tasks=FLEET_LARGE, tags=["test"]):
        for i in range(size):
            FineTuneJobOperator(
                task_id=f"train_{i}",
                namespace="ml",
                image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
                command=["python", "-c", TRAIN],
                retries=1,
                retry_delay=timedelta(seconds=1),
            )
