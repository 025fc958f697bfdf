"""Airflow provider metadata, found through the ``apache_airflow_provider`` entry point.

What ``airflow providers get airflow-k8s-ml`` and the UI's providers page show: the operators, sensors and
triggers by module, the task decorators (``@task.finetune_job``, ``@task.pytorch_job``,
``@task.train_job``), the extra links, the UI plugin, the ``[airflow_k8s_ml]`` configuration options
(:mod:`airflow_k8s_ml.config`) and the documentation. A unit test validates it against Airflow's own
``provider_info.schema.json`` and checks that every operator class of the package is listed.

Connection types: the provider defines none. It uses ``kubernetes`` (cncf.kubernetes provider) and ``aws``
(amazon provider); declaring those under ``connection-types`` would register another provider's type a
second time (Airflow warns about it on every start), so they are listed under ``connection-types-used``.
"""

from __future__ import annotations

from typing import Any

REPOSITORY = "https://github.com/airflow-k8s-ml/airflow-k8s-ml"
DOCS = f"{REPOSITORY}/tree/main/docs"
INTEGRATION = "Kubernetes ML training and serving"

OPERATOR_MODULES = [
    "airflow_k8s_ml.operators.training",
    "airflow_k8s_ml.operators.trainjob",
    "airflow_k8s_ml.operators.tfjob",
    "airflow_k8s_ml.operators.checkpoint",
    "airflow_k8s_ml.operators.inference",
    "airflow_k8s_ml.operators.batch_job",
    "airflow_k8s_ml.operators.batch_inference",
]
SENSOR_MODULES = ["airflow_k8s_ml.sensors.training", "airflow_k8s_ml.sensors.checkpoint"]
TRIGGER_MODULES = [
    "airflow_k8s_ml.triggers.workload",
    "airflow_k8s_ml.triggers.checkpoint",
    "airflow_k8s_ml.triggers.canary",
]
#: ``@task.<name>``: the task decorators (Airflow's ``task-decorators``; ``airflow_k8s_ml.decorators``).
TASK_DECORATORS = [
    {"name": "finetune_job", "class-name": "airflow_k8s_ml.decorators.training.finetune_job_task"},
    {"name": "pytorch_job", "class-name": "airflow_k8s_ml.decorators.training.pytorch_job_task"},
    {"name": "train_job", "class-name": "airflow_k8s_ml.decorators.trainjob.train_job_task"},
]
EXTRA_LINKS = [
    "airflow_k8s_ml.operators.links.ClusterDashboardLink",
    "airflow_k8s_ml.operators.links.ApprovedCheckpointLink",
    "airflow_k8s_ml.operators.links.InferenceServiceLink",
]


def get_provider_info() -> dict[str, Any]:
    """Describe the package to Airflow's ProvidersManager (see the module docstring)."""
    from airflow_k8s_ml import __version__
    from airflow_k8s_ml.config import provider_config

    return {
        "package-name": "airflow-k8s-ml",
        "name": "Airflow K8s ML",
        "description": (
            "Fine-tune (batch/v1 Job, Kubeflow PyTorchJob), gate checkpoints, deploy and batch-serve "
            "ML models on Kubernetes, with deferrable phased deadlines, resumable checkpoints and a "
            "Training tab in the UI."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": DOCS,
                "tags": ["software"],
            }
        ],
        "operators": [{"integration-name": INTEGRATION, "python-modules": OPERATOR_MODULES}],
        "sensors": [{"integration-name": INTEGRATION, "python-modules": SENSOR_MODULES}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": TRIGGER_MODULES}],
        "task-decorators": TASK_DECORATORS,
        "extra-links": EXTRA_LINKS,
        "connection-types-used": [
            {
                "connection-type": "kubernetes",
                "hook-class-name": "airflow.providers.cncf.kubernetes.hooks.kubernetes.KubernetesHook",
                "arguments": ["kubernetes_conn_id"],
            },
            {
                "connection-type": "aws",
                "hook-class-name": "airflow.providers.amazon.aws.hooks.s3.S3Hook",
                "arguments": ["aws_conn_id"],
            },
        ],
        "plugins": [
            {"name": "airflow_k8s_ml", "plugin-class": "airflow_k8s_ml.ui.plugin.AirflowK8sMLPlugin"}
        ],
        "config": provider_config(),
    }
