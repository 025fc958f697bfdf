"""``TrainingJobSensor``: wait for a training Job created elsewhere.

Here Airflow's own ``KubernetesJobOperator`` (the cncf provider) starts a Job without waiting; the sensor
waits for it with the same trigger, deadlines, live logs and failure messages as our operators. The sensor
does not own the Job: it never deletes it.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
from airflow.sdk import DAG

from airflow_k8s_ml.sensors import TrainingJobSensor

#: Both tasks name it: the cncf operator's default namespace is not the connection's.
NAMESPACE = "ml"

with DAG("example_training_sensor", schedule=None, tags=["example"]):
    start = KubernetesJobOperator(
        task_id="start_elsewhere",
        namespace=NAMESPACE,
        job_template_file=None,
        name="example-elsewhere",
        random_name_suffix=False,
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        cmds=[
            "python",
            "-c",
            "import time; [print('epoch', e, flush=True) or time.sleep(0.5) for e in (1, 2, 3)]",
        ],
        wait_until_job_complete=False,
    )
    wait = TrainingJobSensor(
        task_id="wait_for_training",
        # the cncf operator prefixes the name it is given ("job-..."); it pushes the name it used
        name="{{ ti.xcom_pull(task_ids='start_elsewhere', key='job_name') }}",
        namespace=NAMESPACE,
        kind="Job",
        run_timeout=timedelta(minutes=5),
    )
    start >> wait
