"""Pure builders: typed workload specs -> Kubernetes object dicts, plus names, labels and validation.

Nothing here performs I/O (except reading a raw YAML manifest file on request) or imports Airflow or a
Kubernetes client. Public names are resolved lazily so ``import airflow_k8s_ml.manifests`` in a DAG file costs
almost nothing; the submodules can also be imported directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_k8s_ml._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    # naming
    "RunKey": "naming",
    "run_labels": "naming",
    "run_annotations": "naming",
    "workload_name": "naming",
    "manual_job_name": "naming",
    "sanitize_label_value": "naming",
    # formats
    "validate_name": "formats",
    "validate_namespace": "formats",
    "validate_dns1123_label": "formats",
    "validate_dns1123_subdomain": "formats",
    "validate_dns1035_label": "formats",
    # quantities
    "parse_quantity": "quantities",
    "format_quantity": "quantities",
    "validate_resources": "quantities",
    # pod
    "PodTemplate": "pod",
    "Toleration": "pod",
    "Volume": "pod",
    "build_pod_template": "pod",
    "pod_security_context": "pod",
    "spot_tolerations": "pod",
    "spot_node_selector": "pod",
    "gpu_toleration": "pod",
    # training
    "FineTuneJobSpec": "training",
    "PyTorchJobSpec": "training",
    "build_job": "training",
    "build_pytorchjob": "training",
    # Kubeflow Trainer v2
    "TrainJobSpec": "trainjob",
    "build_trainjob": "trainjob",
    # serving
    "InferenceSpec": "serving",
    "Autoscaling": "serving",
    "IngressPolicy": "serving",
    "build_deployment": "serving",
    "build_service": "serving",
    "build_hpa": "serving",
    "build_pdb": "serving",
    "build_network_policy": "serving",
    "build_inference_objects": "serving",
    # batch / cron
    "BatchInferenceSpec": "batch",
    "build_cronjob": "batch",
    "build_batch_job": "batch",
    "job_from_cronjob": "batch",
    "validate_schedule": "cron",
    "validate_time_zone": "cron",
    "next_schedule_time": "cron",
    # raw
    "load_manifest": "raw",
    "prepare_manifest": "raw",
    "strip_status": "raw",
}

__all__ = [
    "Autoscaling",
    "BatchInferenceSpec",
    "FineTuneJobSpec",
    "InferenceSpec",
    "IngressPolicy",
    "PodTemplate",
    "PyTorchJobSpec",
    "RunKey",
    "Toleration",
    "TrainJobSpec",
    "Volume",
    "build_batch_job",
    "build_cronjob",
    "build_deployment",
    "build_hpa",
    "build_inference_objects",
    "build_job",
    "build_network_policy",
    "build_pdb",
    "build_pod_template",
    "build_pytorchjob",
    "build_service",
    "build_trainjob",
    "format_quantity",
    "gpu_toleration",
    "job_from_cronjob",
    "load_manifest",
    "manual_job_name",
    "next_schedule_time",
    "parse_quantity",
    "pod_security_context",
    "prepare_manifest",
    "run_annotations",
    "run_labels",
    "sanitize_label_value",
    "spot_node_selector",
    "spot_tolerations",
    "strip_status",
    "validate_dns1035_label",
    "validate_dns1123_label",
    "validate_dns1123_subdomain",
    "validate_name",
    "validate_namespace",
    "validate_resources",
    "validate_schedule",
    "validate_time_zone",
    "workload_name",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_k8s_ml.manifests.batch import (
        BatchInferenceSpec,
        build_batch_job,
        build_cronjob,
        job_from_cronjob,
    )
    from airflow_k8s_ml.manifests.cron import next_schedule_time, validate_schedule, validate_time_zone
    from airflow_k8s_ml.manifests.formats import (
        validate_dns1035_label,
        validate_dns1123_label,
        validate_dns1123_subdomain,
        validate_name,
        validate_namespace,
    )
    from airflow_k8s_ml.manifests.naming import (
        RunKey,
        manual_job_name,
        run_annotations,
        run_labels,
        sanitize_label_value,
        workload_name,
    )
    from airflow_k8s_ml.manifests.pod import (
        PodTemplate,
        Toleration,
        Volume,
        build_pod_template,
        gpu_toleration,
        pod_security_context,
        spot_node_selector,
        spot_tolerations,
    )
    from airflow_k8s_ml.manifests.quantities import format_quantity, parse_quantity, validate_resources
    from airflow_k8s_ml.manifests.raw import load_manifest, prepare_manifest, strip_status
    from airflow_k8s_ml.manifests.serving import (
        Autoscaling,
        InferenceSpec,
        IngressPolicy,
        build_deployment,
        build_hpa,
        build_inference_objects,
        build_network_policy,
        build_pdb,
        build_service,
    )
    from airflow_k8s_ml.manifests.training import FineTuneJobSpec, PyTorchJobSpec, build_job, build_pytorchjob
    from airflow_k8s_ml.manifests.trainjob import TrainJobSpec, build_trainjob
