"""A typo in a manifest fails, naming the field, and leaves nothing behind (issue 12, point 8).

Every create and patch our operators send asks for ``fieldValidation=Strict`` (as ``kubectl`` does), so the
API server answers 400 ``strict decoding error: unknown field "spec.bogusField"`` instead of dropping the
field and creating the object. The serving operator applies several objects: each is validated by a
server-side dry run before the first one is written, so a typo in one of them creates none. "Nothing" is
counted, not listed: no write request is carried out during the call (the cluster's ``/metrics``), so a
create-then-delete fails these tests; the lists afterwards say what a failure left behind.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_k8s_ml.errors import ApiError
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator, TrainJobOperator
from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
from tests.integration import serving_helpers

from .training_helpers import jobs, make_context, run_task
from .write_count import no_write_accepted

pytestmark = pytest.mark.usefixtures("kube_conn")

RAW_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "typo"},
    "spec": {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "python:3.11", "command": ["python", "-c", "1"]}],
            }
        },
    },
}


def with_spec_field(manifest: dict[str, Any]) -> str:
    manifest["spec"]["bogusField"] = True
    return "spec.bogusField"


def with_container_typo(manifest: dict[str, Any]) -> str:
    manifest["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    return "spec.template.spec.containers[0].imagePullPolcy"


@pytest.mark.parametrize("typo", [with_spec_field, with_container_typo])
def test_raw_job_manifest_with_an_unknown_field_fails_naming_it_and_creates_no_job(
    batch: Any, namespace: str, typo: Any
) -> None:
    manifest = copy.deepcopy(RAW_JOB)
    field = typo(manifest)
    op = FineTuneJobOperator(task_id="typo", namespace=namespace, manifest=manifest)
    with no_write_accepted() as sent, pytest.raises(ApiError) as info:
        run_task(op, make_context("typo"))
    assert sent == {("POST", "jobs", "400"): 1}  # the one create, refused
    assert info.value.status == 400
    assert f'unknown field "{field}"' in str(info.value)
    assert jobs(batch, namespace) == []


RAW_PYTORCHJOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "typo"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", "1"]}
                        ]
                    }
                },
            }
        }
    },
}


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("spec",), "spec.bogusField"),
        (("spec", "pytorchReplicaSpecs", "Master"), "spec.pytorchReplicaSpecs.Master.bogusField"),
    ],
)
def test_raw_pytorchjob_manifest_with_an_unknown_field_fails_naming_it_and_creates_nothing(
    api_client: Any, namespace: str, path: tuple[str, ...], field: str
) -> None:
    from kubernetes import client

    manifest = copy.deepcopy(RAW_PYTORCHJOB)
    target = manifest
    for key in path:
        target = target[key]
    target["bogusField"] = True
    op = PyTorchJobOperator(task_id="typo", namespace=namespace, manifest=manifest)
    with no_write_accepted() as sent, pytest.raises(ApiError) as info:
        run_task(op, make_context("typo"))
    assert sent == {("POST", "pytorchjobs", "400"): 1}  # the one create, refused
    assert info.value.status == 400
    assert f'unknown field "{field}"' in str(info.value)
    custom = client.CustomObjectsApi(api_client)
    assert custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")["items"] == []
    assert client.CoreV1Api(api_client).list_namespaced_pod(namespace).items == []


RAW_TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "typo"},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"image": "python:3.11", "command": ["python", "-c", "1"], "numNodes": 1, "bogusField": 1},
    },
}


def test_raw_trainjob_manifest_with_an_unknown_field_fails_naming_it_and_creates_nothing(
    api_client: Any, namespace: str
) -> None:
    from kubernetes import client

    op = TrainJobOperator(task_id="typo", namespace=namespace, manifest=copy.deepcopy(RAW_TRAINJOB))
    with no_write_accepted() as sent, pytest.raises(ApiError) as info:
        run_task(op, make_context("typo"))
    assert sent == {("POST", "trainjobs", "400"): 1}  # the one create, refused
    assert info.value.status == 400
    assert 'unknown field "spec.trainer.bogusField"' in str(info.value)
    custom = client.CustomObjectsApi(api_client)
    found = custom.list_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs")
    assert found["items"] == []


def serving_objects(api_client: Any, namespace: str) -> dict[str, list[str]]:
    from kubernetes import client

    apps, core = client.AppsV1Api(api_client), client.CoreV1Api(api_client)
    hpa, policy = client.AutoscalingV2Api(api_client), client.PolicyV1Api(api_client)
    networking = client.NetworkingV1Api(api_client)
    lists = {
        "Deployment": apps.list_namespaced_deployment(namespace),
        "Service": core.list_namespaced_service(namespace),
        "HorizontalPodAutoscaler": hpa.list_namespaced_horizontal_pod_autoscaler(namespace),
        "PodDisruptionBudget": policy.list_namespaced_pod_disruption_budget(namespace),
        "NetworkPolicy": networking.list_namespaced_network_policy(namespace),
    }
    return {kind: [o.metadata.name for o in found.items] for kind, found in lists.items()}


def test_deployment_override_with_an_unknown_field_fails_naming_it_and_creates_nothing(
    namespace: str, api_client: Any
) -> None:
    op = InferenceDeploymentOperator(
        task_id="deploy",
        name="typo",
        namespace=namespace,
        model_uri="s3://models/digits/step-4/",
        image="python:3.11",
        command=["python", "-c", "1"],
        port=8080,
        requests={"cpu": "50m"},
        autoscaling={"min_replicas": 2, "max_replicas": 3, "target_cpu_utilization": 80},
        pdb_min_available=1,
        network_policy={"from_namespaces": ["airflow"]},
        deployment_overrides={"spec": {"bogus": 1}},
    )
    with no_write_accepted() as sent, pytest.raises(ApiError) as info:
        serving_helpers.run_task(op, serving_helpers.context("deploy"))
    assert not sent, f"the dry runs found the typo, yet writes were sent: {dict(sent)}"
    assert info.value.status == 400
    assert 'unknown field "spec.bogus"' in str(info.value)
    assert serving_objects(api_client, namespace) == {
        "Deployment": [],
        "Service": [],
        "HorizontalPodAutoscaler": [],
        "PodDisruptionBudget": [],
        "NetworkPolicy": [],
    }
