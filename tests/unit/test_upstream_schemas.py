"""Each kind's typical objects, rendered by the operators without a cluster, are valid under upstream's
published schemas (strictly: tests/upstream_schemas.py): Job, PyTorchJob and TrainJob with the common pod
arguments, and the serving objects (Deployment, Service, HPA, PDB, NetworkPolicy). A typo is caught with its
path, so the check cannot pass by checking nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator, TrainJobOperator
from airflow_k8s_ml.operators._serving import inference_spec, render_inference
from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
from tests.upstream_schemas import problems, schema_of

KEY = RunKey("nightly", "train", "scheduled__2024-05-01T00:00:00+00:00")

POD: dict[str, Any] = {
    "env": {"EPOCHS": 3},
    "secret_env": {"HF_TOKEN": "hf:token"},
    "requests": {"cpu": "2", "memory": "8Gi"},
    "gpus": 1,
    "node_selector": {"pool": "gpu"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "image_pull_secrets": ["registry"],
    "volumes": [{"name": "data", "mount_path": "/data", "pvc": "datasets", "read_only": True}],
    "checkpoint_uri": "s3://bucket/ckpt/",
    "queue_name": "user-queue",
}


def render(op: Any) -> dict[str, Any]:
    args = op._arguments(op.manifest)
    return op._render_object(args, op._placement(args, KEY, "ml", "s3://bucket/ckpt/step-1/"))


def training_objects() -> list[dict[str, Any]]:
    common = {"image": "trainer:1", "command": ["python", "train.py"]}
    return [
        render(FineTuneJobOperator(task_id="train", env_from=["s3-credentials"], **common, **POD)),
        render(FineTuneJobOperator(task_id="train", **common)),
        render(PyTorchJobOperator(task_id="train", workers=2, env_from=["s3-credentials"], **common, **POD)),
        render(TrainJobOperator(task_id="train", num_nodes=2, **common, **POD)),
        render(TrainJobOperator(task_id="train", **common)),
    ]


def serving_objects() -> list[dict[str, Any]]:
    values: dict[str, Any] = {
        "task_id": "deploy",
        "name": "digits",
        "model_uri": "file:///m/step-7/",
        "image": "py:3",
        "port": 8080,
        "readiness_path": "/readyz",
        "liveness_path": "/healthz",
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "autoscaling": {"min_replicas": 2, "max_replicas": 4, "target_cpu_utilization": 70},
        "pdb_min_available": 1,
        "network_policy": {"from_namespaces": ["airflow"]},
    }
    args = InferenceDeploymentOperator(**values)._arguments()
    return render_inference(inference_spec(args), "digits", "ml", KEY)


def test_typical_training_objects_are_valid_upstream() -> None:
    objects = training_objects()
    assert [(o["kind"], schema_of(o)) for o in objects] == [
        ("Job", "kubernetes"),
        ("Job", "kubernetes"),
        ("PyTorchJob", "kubeflow-training"),
        ("TrainJob", "kubeflow-trainer-api"),
        ("TrainJob", "kubeflow-trainer-api"),
    ]
    for obj in objects:
        assert problems(obj) == [], obj["kind"]


def test_typical_serving_objects_are_valid_upstream() -> None:
    objects = serving_objects()
    assert {o["kind"] for o in objects} >= {"Deployment", "Service", "HorizontalPodAutoscaler"}
    for obj in objects:
        assert problems(obj) == [], obj["kind"]


@pytest.mark.parametrize(
    ("kind", "path", "expected"),
    [
        ("Job", ("spec", "template", "spec", "containers", 0), "spec.template.spec.containers[0]"),
        (
            "PyTorchJob",
            ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].imagePullPolcy",
        ),
        ("TrainJob", ("spec", "trainer"), "spec.trainer.imagePullPolcy"),
    ],
)
def test_an_unknown_field_fails_with_its_path(kind: str, path: tuple[Any, ...], expected: str) -> None:
    obj = copy.deepcopy(next(o for o in training_objects() if o["kind"] == kind))
    here: Any = obj
    for step in path:
        here = here[step]
    here["imagePullPolcy"] = "Always"
    found = problems(obj)
    assert found and all(expected in p and "imagePullPolcy" in p for p in found), found
