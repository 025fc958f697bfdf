"""Nightly retraining: fine-tune -> checkpoint gate -> deploy -> batch inference (CronJob + run now).

The same file runs on the embedded local cluster (``make demo``) and on a real cluster: only the
connections differ (``kubernetes_default`` -> a kubeconfig, ``aws_default`` -> S3 or MinIO). Pods read S3
credentials from the Secret ``s3-credentials`` in the target namespace (or workload identity).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.providers.standard.operators.python import BranchPythonOperator, ShortCircuitOperator
from airflow.sdk import DAG, CronTriggerTimetable, Param

from airflow_k8s_ml.checkpoints import run_folder
from airflow_k8s_ml.operators import (
    BatchInferenceCronJobOperator,
    CheckpointCheckOperator,
    FineTuneJobOperator,
    InferenceDeploymentOperator,
    PyTorchJobOperator,
    TrainJobOperator,
)

LOCAL_TZ = pendulum.timezone("Europe/Amsterdam")
NAMESPACE = "ml"
BUCKET = "s3://ml-models"
#: The image holding this package's workloads (`pip install airflow-k8s-ml[workloads]`); the local cluster
#: records it and runs the command with its own Python.
IMAGE = "ghcr.io/airflow-k8s-ml/workloads:0.1.0"
#: Templates never assume a logical date: Airflow 3 creates manual runs (UI, REST, `airflow dags trigger`)
#: without one. The run id names the run's checkpoint folder (its retries share it); `run_after` dates it.
CHECKPOINTS = BUCKET + "/checkpoints/nightly/{{ run_id | run_folder }}"
BASE_MODEL = BUCKET + "/base-model/step-1/"
GATE_URI = "{{ ti.xcom_pull(task_ids='checkpoint_gate')['uri'] }}"
S3_SECRET = ["s3-credentials"]
#: The same Secret as one reference per variable: a TrainJob's trainer has no envFrom.
S3_SECRET_ENV = {
    var: f"s3-credentials:{var}"
    for var in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
}

FINETUNE_ARGS = [
    "-m",
    "airflow_k8s_ml.workloads.finetune",
    "--epochs",
    "{{ params.epochs }}",
    "--checkpoint-uri",
    CHECKPOINTS,
    "--base-model",
    BASE_MODEL,
    "--max-train-samples",
    "{{ params.max_train_samples }}",
]
#: Phase budgets from Params (seconds), so a run triggered from the UI can tighten or relax them.
DEADLINES = {
    "admission_timeout": "{{ params.admission_timeout_minutes * 60 }}",
    "startup_timeout": "{{ params.startup_timeout_minutes * 60 }}",
    "run_timeout": "{{ params.run_timeout_minutes * 60 }}",
}
TRAINING = {
    "namespace": NAMESPACE,
    "image": IMAGE,
    "command": ["python"],
    "args": FINETUNE_ARGS,
    "env_from": S3_SECRET,
    "requests": {"cpu": "1", "memory": "2Gi"},
    "limits": {"memory": "4Gi"},
    # Retries resume from the newest complete checkpoint of this run (env RESUME_FROM).
    "resume_from": "latest",
    "checkpoint_uri": CHECKPOINTS,
    "active_deadline_seconds": 4 * 3600,  # Kubernetes-side backstop
    "deadline": timedelta(hours=6),
    "retry_delay": timedelta(minutes=2),
    # Kueue: the LocalQueue to submit to ("" = not queued); a queued run waits, logged, for admission.
    "queue_name": "{{ params.queue }}",
    **DEADLINES,
}
#: The TrainJob takes the same arguments but the Secret (as ``secret_env``: no envFrom on a trainer) and
#: ``active_deadline_seconds``'s meaning is the TrainJob's own (Trainer v2.2+).
TRAINJOB = {
    **{key: value for key, value in TRAINING.items() if key != "env_from"},
    "secret_env": S3_SECRET_ENV,
}

DOC = """
### Nightly fine-tune

1. **fine_tune** — a `batch/v1` Job (`mode=job`), a Kubeflow `PyTorchJob` with `workers` workers
   (`mode=pytorchjob`) or a Kubeflow Trainer v2 `TrainJob` of `workers` nodes on the `torch-distributed`
   runtime (`mode=trainjob`), warm-started from the base model; a checkpoint per epoch; retries resume
   from the newest complete checkpoint. Admission, start-up and run deadlines come from the Params; with
   a `queue` it is submitted to that Kueue LocalQueue and its log shows the wait for admission.
2. **checkpoint_gate** — newest complete checkpoint, integrity verified from S3 checksums, and
   `val_accuracy >= accuracy_threshold`.
3. **deploy_model** (when `deploy`) — Deployment + Service + HPA + PDB, rollout wait, smoke test through
   the API server's service proxy, rollback on failure.
4. **batch_inference** — a CronJob for nightly scoring plus a run now.
"""


#: 01:30 every night. No start_date and run_immediately=timedelta(0): unpausing the DAG waits for the next
#: 01:30 instead of starting the most recent missed run at once (which would deploy a model). (Airflow 3.3
#: treats run_immediately=False like None: it still runs a slot missed by under 10% of the period, 2.4 h.)
NIGHTLY = CronTriggerTimetable("30 1 * * *", timezone=LOCAL_TZ, run_immediately=timedelta(0))
#: Airflow retries of each training task. A disruption (eviction, preemption, spot interruption) spends
#: none: the pod is replaced in the same attempt (docs/operators.md "Disruptions are not failures"); a
#: retry is for a real failure, and resumes from the newest checkpoint.
TRAINING_RETRIES = 2


def build(
    dag_id: str = "nightly_finetune",
    *,
    training_retries: int = TRAINING_RETRIES,
    schedule: CronTriggerTimetable | None = NIGHTLY,
) -> DAG:
    """The nightly pipeline. Another DAG file can build a variant of it (its own ``dag_id``, the training
    tasks' retries, the schedule) without copying it: ``from nightly_finetune import build``. Not
    auto-registered, so importing this module from another DAG file does not put this file's DAG there."""
    with DAG(
        dag_id=dag_id,
        description="Fine-tune, gate, deploy and batch-score a model every night",
        schedule=schedule,
        auto_register=False,
        catchup=False,
        user_defined_filters={"run_folder": run_folder},
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=8),
        default_args={"owner": "ml-platform", "retries": 1, "retry_delay": timedelta(minutes=5)},
        tags=["ml", "kubernetes"],
        doc_md=DOC,
        params={
            # A `type` without "null" makes the trigger form require a value; `enum` refuses an empty one.
            "mode": Param(
                "job",
                type="string",
                enum=["job", "pytorchjob", "trainjob"],
                title="Training mode",
                description="How to run the fine-tune: job = one batch/v1 Job (one pod); "
                "pytorchjob = a Kubeflow PyTorchJob with a master and `workers` workers (DDP); "
                "trainjob = a Kubeflow Trainer v2 TrainJob of `workers` nodes (DDP). Required.",
            ),
            "workers": Param(
                1,
                type="integer",
                minimum=1,
                maximum=16,
                title="Distributed workers",
                description="pytorchjob: worker replicas besides the master, in pods (1-16); "
                "trainjob: training nodes, in pods (1-16). Unused when mode is job.",
            ),
            "epochs": Param(
                5,
                type="integer",
                minimum=1,
                maximum=100,
                title="Epochs",
                description="Training epochs, in full passes over the training set (1-100); "
                "one checkpoint is committed per epoch.",
            ),
            "max_train_samples": Param(
                1200,
                type="integer",
                minimum=100,
                title="Training samples",
                description="Most training examples to use, in samples (at least 100).",
            ),
            "accuracy_threshold": Param(
                0.85,
                type="number",
                minimum=0,
                maximum=1,
                title="Accuracy gate",
                description="Lowest val_accuracy the checkpoint gate accepts, as a fraction from 0 to 1 "
                "(0.85 = 85 %).",
            ),
            "deploy": Param(
                True,
                type="boolean",
                title="Deploy the model",
                description="Deploy the gated model and start batch scoring (true/false); "
                "off: the run ends after the gate.",
            ),
            "canary_percent": Param(
                0,
                type="integer",
                minimum=0,
                maximum=99,
                title="Canary share",
                description="Roll a new model out as a canary first: its share of the serving pods, in "
                "percent (1-99); it is judged for 2 minutes on its error rate (at most 1 %, at least 50 "
                "requests) and promoted or rolled back. 0: no canary, the new model replaces the old one at "
                "once.",
            ),
            "autoscale_metric": Param(
                "cpu",
                type="string",
                enum=["cpu", "rps"],
                title="Autoscaling metric",
                description="What the model server's HPA scales on: cpu = 70 % CPU utilisation per pod; "
                "rps = 20 requests per second per pod (the custom metric http_requests_per_second; a real "
                "cluster needs a custom metrics server such as the Prometheus adapter).",
            ),
            "queue": Param(
                "",
                type="string",
                title="Kueue LocalQueue",
                description="Submit the training to this Kueue LocalQueue (the workload is created suspended "
                "and waits for admission, under the admission deadline); empty: not queued.",
            ),
            "admission_timeout_minutes": Param(
                30,
                type="integer",
                minimum=1,
                title="Admission deadline",
                description="Longest wait for the cluster to admit and schedule the training pods "
                "(queued, no GPU free), in minutes.",
            ),
            "startup_timeout_minutes": Param(
                15,
                type="integer",
                minimum=1,
                title="Start-up deadline",
                description="Longest time from scheduled to running (image pull, init containers), "
                "in minutes.",
            ),
            "run_timeout_minutes": Param(
                120,
                type="integer",
                minimum=1,
                title="Run deadline",
                description="Longest training time once the first pod runs, in minutes.",
            ),
        },
    ) as dag:
        choose = BranchPythonOperator(
            task_id="choose_training_mode",
            python_callable=lambda params: f"fine_tune_{params['mode']}",
            doc_md="Picks the Job, the PyTorchJob or the TrainJob path from the `mode` Param.",
        )
        job = FineTuneJobOperator(
            task_id="fine_tune_job",
            doc_md="Single-process fine-tune as a `batch/v1` Job.",
            retries=training_retries,
            **TRAINING,  # type: ignore[arg-type]
        )
        pytorchjob = PyTorchJobOperator(
            task_id="fine_tune_pytorchjob",
            doc_md="Distributed (DDP, gloo) fine-tune as a Kubeflow PyTorchJob: master + `workers` workers.",
            workers="{{ params.workers }}",  # type: ignore[arg-type]
            retries=training_retries,
            **TRAINING,  # type: ignore[arg-type]
        )
        trainjob = TrainJobOperator(
            task_id="fine_tune_trainjob",
            doc_md="Distributed (DDP, gloo) fine-tune as a Kubeflow Trainer v2 TrainJob of `workers` nodes.",
            num_nodes="{{ params.workers }}",
            num_proc_per_node=1,  # one process per node: the entrypoint reads the PET_* variables itself
            retries=training_retries,
            **TRAINJOB,  # type: ignore[arg-type]
        )
        gate = CheckpointCheckOperator(
            task_id="checkpoint_gate",
            trigger_rule="none_failed_min_one_success",
            base_uri=CHECKPOINTS,
            metric_rules='{"val_accuracy": ">= {{ params.accuracy_threshold }}"}',
            doc_md="Newest complete checkpoint of this run, verified without download, gated on accuracy.",
        )
        should_deploy = ShortCircuitOperator(
            task_id="should_deploy",
            python_callable=lambda params: bool(params["deploy"]),
            ignore_downstream_trigger_rules=True,
            doc_md="Skips deployment and batch scoring when the `deploy` Param is false.",
        )
        deploy = InferenceDeploymentOperator(
            task_id="deploy_model",
            name="digits",
            namespace=NAMESPACE,
            model_uri=GATE_URI,
            image=IMAGE,
            command=["python", "-m", "airflow_k8s_ml.workloads.serve"],
            env_from=S3_SECRET,
            requests={"cpu": "250m", "memory": "512Mi"},
            port=8280,  # not 8080: Airflow's own API server listens there on the same machine
            readiness_path="/readyz",
            liveness_path="/healthz",
            autoscaling={
                "min_replicas": 2,
                "max_replicas": 4,
                "target_cpu_utilization": 70,
                "target_requests_per_second": 20,
                "autoscale_metric": "{{ params.autoscale_metric }}",
            },
            canary={
                "percent": "{{ params.canary_percent }}",
                "analysis_seconds": 120,
                "max_error_rate": 0.01,
                "min_requests": 50,
            },
            pdb_min_available=1,
            smoke_path="/predict",
            smoke_request={"instances": [[0.0] * 64]},
            expected_response=["$.predictions"],
            rollout_timeout=timedelta(minutes=15),
            doc_md="Deployment + Service + HPA + PDB; a canary first when `canary_percent` > 0; rollout "
            "wait, smoke test, rollback on failure.",
        )
        batch = BatchInferenceCronJobOperator(
            task_id="batch_inference",
            name="digits-batch",
            namespace=NAMESPACE,
            schedule="0 3 * * *",
            time_zone="Europe/Amsterdam",
            model_uri=GATE_URI,
            input_uri=BUCKET + "/batch-input/",
            output_uri=BUCKET + "/predictions/{{ dag_run.run_after | ds_nodash }}/",
            image=IMAGE,
            command=["python", "-m", "airflow_k8s_ml.workloads.batch_predict"],
            env_from=S3_SECRET,
            run_now=True,
            run_timeout=timedelta(minutes=30),
            doc_md="CronJob for nightly batch scoring, plus a run now with the freshly gated model.",
        )

        choose >> [job, pytorchjob, trainjob] >> gate >> should_deploy >> deploy >> batch
    return dag


dag = build()
