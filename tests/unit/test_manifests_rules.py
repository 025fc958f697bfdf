"""The rules modules and the typed specs must agree: the operators check static arguments with the rules at
DAG parse time and build the specs in ``execute``, so a value one accepts the other must accept too."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.batch import BatchInferenceSpec
from airflow_k8s_ml.manifests.batch_rules import BATCH_DEFAULTS, BATCH_URIS
from airflow_k8s_ml.manifests.pod import PodTemplate, Toleration, Volume
from airflow_k8s_ml.manifests.pod_rules import (
    POD_DEFAULTS,
    TOLERATION_DEFAULTS,
    VOLUME_DEFAULTS,
    check_pod_fields,
)
from airflow_k8s_ml.manifests.serving import Autoscaling, InferenceSpec, IngressPolicy
from airflow_k8s_ml.manifests.serving_rules import AUTOSCALING_DEFAULTS, INFERENCE_DEFAULTS, INGRESS_DEFAULTS
from airflow_k8s_ml.manifests.tfjob import TFJobSpec
from airflow_k8s_ml.manifests.tfjob_rules import TFJOB_DEFAULTS
from airflow_k8s_ml.manifests.training import FineTuneJobSpec, PyTorchJobSpec
from airflow_k8s_ml.manifests.training_rules import (
    FINETUNE_JOB_DEFAULTS,
    PYTORCHJOB_DEFAULTS,
    check_finetune_job_fields,
    check_pytorchjob_fields,
)
from airflow_k8s_ml.manifests.trainjob import TrainJobSpec
from airflow_k8s_ml.manifests.trainjob_rules import TRAINJOB_DEFAULTS


def defaults(cls: type, *, without: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for f in fields(cls):
        if f.name in without:
            continue
        out[f.name] = f.default_factory() if f.default_factory is not MISSING else f.default
    return out


@pytest.mark.parametrize(
    ("cls", "rules", "without"),
    [
        (PodTemplate, POD_DEFAULTS, ("image",)),
        (Toleration, TOLERATION_DEFAULTS, ()),
        (Volume, VOLUME_DEFAULTS, ("name", "mount_path")),
        (FineTuneJobSpec, FINETUNE_JOB_DEFAULTS, ("pod",)),
        (PyTorchJobSpec, PYTORCHJOB_DEFAULTS, ("master", "worker")),
        (TrainJobSpec, TRAINJOB_DEFAULTS, ("trainer",)),
        (TFJobSpec, TFJOB_DEFAULTS, ("pod",)),
        (Autoscaling, AUTOSCALING_DEFAULTS, ("max_replicas",)),
        (IngressPolicy, INGRESS_DEFAULTS, ()),
        (InferenceSpec, INFERENCE_DEFAULTS, ("pod", "model_uri", "autoscaling", "network_policy")),
        (BatchInferenceSpec, BATCH_DEFAULTS, ("pod", *BATCH_URIS)),
    ],
)
def test_rules_defaults_are_the_specs_fields(
    cls: type, rules: dict[str, Any], without: tuple[str, ...]
) -> None:
    assert defaults(cls, without=without) == dict(rules)


BAD_POD_ARGUMENTS = [
    {"image": ""},
    {"image": "a b"},
    {"image": "x", "env": {"1BAD": "v"}},
    {"image": "x", "env": {"A": True}},
    {"image": "x", "env": {"A": "1"}, "secret_env": {"A": "s:k"}},
    {"image": "x", "secret_env": {"TOKEN": "no-key"}},
    {"image": "x", "requests": {"cpu": "four"}},
    {"image": "x", "requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}},
    {"image": "x", "gpus": 1.5},
    {"image": "x", "gpus": 1, "requests": {"nvidia.com/gpu": "1"}},
    {"image": "x", "gpu_resource": "cpu"},
    {"image": "x", "tolerations": [{"operator": "Equal"}]},
    {"image": "x", "tolerations": [{"key": "k", "tolerationSeconds": 5}]},
    {"image": "x", "tolerations": [{"colour": "red"}]},
    {"image": "x", "volumes": [{"name": "v", "mount_path": "/v"}]},
    {"image": "x", "volumes": [{"name": "v", "mount_path": "rel", "pvc": "p"}]},
    {"image": "x", "volumes": [{"mount_path": "/v", "pvc": "p"}]},
    {
        "image": "x",
        "shm_size": "1Gi",
        "volumes": [{"name": "v", "mount_path": "/dev/shm", "empty_dir": True}],
    },
    {"image": "x", "service_account": "Bad_Name"},
    {"image": "x", "node_selector": {"bad key!": "v"}},
    {"image": "x", "labels": {"k": "v" * 64}},
    {"image": "x", "env_from_secrets": ["UPPER"]},
    {"image": "x", "termination_grace_period_seconds": -1},
    {"image": "x", "image_pull_policy": "Sometimes"},
]


def error_of(call: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        call(*args, **kwargs)
    return caught.value.field, str(caught.value)


@pytest.mark.parametrize("arguments", BAD_POD_ARGUMENTS, ids=lambda a: ",".join(sorted(a)))
def test_bad_pod_arguments_fail_the_same_in_the_rules_and_the_template(arguments: dict[str, Any]) -> None:
    assert error_of(check_pod_fields, arguments) == error_of(PodTemplate, **arguments)


def test_the_rules_normalise_like_the_template() -> None:
    arguments = {
        "image": "trainer:1",
        "command": ["python"],
        "env": {"EPOCHS": 3},
        "requests": {"cpu": 2, "memory": "1Gi"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "data", "mountPath": "/data", "pvc": "datasets"}],
    }
    checked = check_pod_fields(arguments)
    template = PodTemplate(**arguments)
    assert checked["command"] == template.command == ("python",)
    assert checked["env"] == template.env == {"EPOCHS": "3"}
    assert checked["requests"] == template.requests
    assert [Toleration(**t) for t in checked["tolerations"]] == list(template.tolerations)
    assert [Volume(**v) for v in checked["volumes"]] == list(template.volumes)


@pytest.mark.parametrize(
    "arguments",
    [
        {"restart_policy": "Always"},
        {"backoff_limit": -1},
        {"active_deadline_seconds": 0},
        {"queue_name": "q", "suspend": False},
        {"queue_name": "Bad Queue"},
        {"labels": {"k": "bad value!"}},
        {"parallelism": 0},
    ],
    ids=lambda a: ",".join(sorted(a)),
)
def test_bad_job_arguments_fail_the_same_in_the_rules_and_the_spec(arguments: dict[str, Any]) -> None:
    pod = PodTemplate(image="x")
    assert error_of(check_finetune_job_fields, arguments) == error_of(FineTuneJobSpec, pod=pod, **arguments)


@pytest.mark.parametrize(
    "arguments",
    [
        {"workers": -1},
        {"nproc_per_node": "many"},
        {"nproc_per_node": 0},
        {"restart_policy": "Sometimes"},
        {"clean_pod_policy": "Some"},
        {"workers": 1, "min_available": 3},
        {"scheduling_queue": "Bad Queue"},
    ],
    ids=lambda a: ",".join(sorted(a)),
)
def test_bad_pytorchjob_arguments_fail_the_same_in_the_rules_and_the_spec(arguments: dict[str, Any]) -> None:
    pod = PodTemplate(image="x")
    assert error_of(check_pytorchjob_fields, arguments) == error_of(PyTorchJobSpec, master=pod, **arguments)


def test_unknown_arguments_are_named() -> None:
    assert error_of(check_pod_fields, {"image": "x", "imag_pull_policy": "Always"})[0] == "imag_pull_policy"
    assert error_of(check_finetune_job_fields, {"workers": 2})[0] == "workers"
