"""Two runs competing for one GPU's quota (``make demo-queue``): a small queued GPU training task.

Each run's task asks for one ``nvidia.com/gpu`` through Kueue's LocalQueue ``user-queue``. With a
ClusterQueue of one GPU (``airflow-k8s-ml local up --gpus 1 --gpu-quota 1``, or the demo), Kueue admits one
run's Job; the other's stays suspended with Kueue's reason in its task log until the first finishes and
releases the quota, then it is admitted and runs. On a real cluster: the same file, with a real Kueue
LocalQueue named by the ``queue`` Param.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_k8s_ml.operators import FineTuneJobOperator

#: The training stand-in: it holds its GPU for ``seconds`` and says which one it got.
TRAIN = (
    "import os, sys, time\n"
    "seconds = int(sys.argv[1])\n"
    "print('training on GPU', os.environ.get('CUDA_VISIBLE_DEVICES'), flush=True)\n"
    "for k in range(1, seconds + 1):\n"
    "    time.sleep(1)\n"
    "    print(f'step={k}/{seconds}', flush=True)\n"
)

with DAG(
    "queued_gpu_training",
    schedule=None,
    max_active_runs=2,
    tags=["demo", "kueue"],
    params={
        "queue": Param("user-queue", type="string", description="Kueue LocalQueue in the namespace"),
        "seconds": Param(8, type="integer", minimum=1, description="how long each run holds its GPU"),
    },
) as dag:
    FineTuneJobOperator(
        task_id="train",
        namespace="ml",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", TRAIN],
        args=["{{ params.seconds }}"],
        gpus=1,
        queue_name="{{ params.queue }}",
        admission_timeout=timedelta(minutes=10),
        run_timeout=timedelta(minutes=10),
        retries=0,
    )
