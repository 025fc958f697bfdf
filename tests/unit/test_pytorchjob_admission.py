"""PyTorchJob admission: CRD type checks, the training operator's webhook rules and messages, defaults."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.controllers.pytorchjob.admission import (
    admit_pytorchjob,
    schema_errors,
    set_defaults,
    webhook_errors,
)


def replica(replicas: Any = 1, **container: Any) -> dict[str, Any]:
    main = {"name": "pytorch", "image": "img", **container}
    spec: dict[str, Any] = {"template": {"spec": {"containers": [main]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


def job(name: str = "train", **specs: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"pytorchReplicaSpecs": specs}}


def messages(problems: list[tuple[str, str, str]]) -> list[str]:
    return [f"{path}: {message}" for path, _, message in problems]


def test_a_valid_job_passes_and_gets_upstream_defaults() -> None:
    admitted = admit_pytorchjob(job(Master=replica(), Worker=replica(replicas=None)), None)

    spec = admitted["spec"]
    assert spec["runPolicy"] == {"cleanPodPolicy": "None"}
    assert spec["nprocPerNode"] == "auto"
    for rtype in ("Master", "Worker"):
        replica_spec = spec["pytorchReplicaSpecs"][rtype]
        assert (replica_spec["replicas"], replica_spec["restartPolicy"]) == (1, "OnFailure")
        ports = replica_spec["template"]["spec"]["containers"][0]["ports"]
        assert ports == [{"name": "pytorchjob-port", "containerPort": 23456}]


def test_defaults_keep_what_the_user_set() -> None:
    body = job(Master=replica(ports=[{"name": "pytorchjob-port", "containerPort": 29500}]))
    body["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "ExitCode"
    body["spec"]["runPolicy"] = {"cleanPodPolicy": "All"}
    body["spec"]["nprocPerNode"] = "2"

    set_defaults(body)

    master = body["spec"]["pytorchReplicaSpecs"]["Master"]
    assert master["restartPolicy"] == "ExitCode"
    assert master["template"]["spec"]["containers"][0]["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 29500}
    ]
    assert (body["spec"]["runPolicy"]["cleanPodPolicy"], body["spec"]["nprocPerNode"]) == ("All", "2")


def test_elastic_policy_defaults_min_and_max_from_the_workers() -> None:
    body = job(Worker=replica(replicas=3))
    body["spec"]["elasticPolicy"] = {"nProcPerNode": 2}

    set_defaults(body)

    assert body["spec"]["elasticPolicy"] == {"nProcPerNode": 2, "minReplicas": 3, "maxReplicas": 3}
    assert "nprocPerNode" not in body["spec"]  # the legacy field is used instead


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            job(Master=replica(replicas=None)),
            ["spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"],
        ),
        (
            job(Master=replica(replicas=2)),
            ["spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"],
        ),
        (
            job(Chief=replica()),
            [
                'spec.pytorchReplicaSpecs[Chief]: Unsupported value: "Chief": '
                'supported values: "Master", "Worker"'
            ],
        ),
        (
            job(Worker={"template": {"spec": {"containers": []}}}),
            [
                "spec.pytorchReplicaSpecs[Worker].template.spec.containers: "
                "Required value: must be specified",
                "spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required value: "
                "must have at least one container with name pytorch",
            ],
        ),
        (
            job(Worker=replica(image="")),
            [
                "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: "
                "Required value: must be required"
            ],
        ),
        (
            {"metadata": {"name": "train"}, "spec": {}},
            ["spec.pytorchReplicaSpecs: Required value: must be required"],
        ),
    ],
)
def test_webhook_rules(body: dict[str, Any], expected: list[str]) -> None:
    assert messages(webhook_errors(body)) == expected


def test_name_must_be_a_dns_1035_label() -> None:
    (problem,) = messages(webhook_errors(job("x" * 64, Worker=replica())))
    assert problem.startswith(
        f'metadata.name: Invalid value: "{"x" * 64}": should match: must be no more than 63'
    )


def test_elastic_policy_rules() -> None:
    body = job(Master=replica())
    body["spec"]["elasticPolicy"] = {"nProcPerNode": 1}
    body["spec"]["nprocPerNode"] = "1"
    assert messages(webhook_errors(body)) == [
        "spec.pytorchReplicaSpecs.Worker: Required value: must be configured if elastic policy is used",
        "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode",
    ]


def test_managed_by_must_be_a_known_controller() -> None:
    body = job(Worker=replica())
    body["spec"]["runPolicy"] = {"managedBy": "example.com/other"}
    assert messages(webhook_errors(body)) == [
        'spec.runPolicy.managedBy: Unsupported value: "example.com/other": supported values: '
        '"kueue.x-k8s.io/multikueue", "kubeflow.org/training-operator"'
    ]


def test_denial_is_a_403_with_the_webhook_prefix_and_an_aggregate() -> None:
    with pytest.raises(errors.StatusError) as caught:
        admit_pytorchjob(job(Master=replica(replicas=3), Worker=replica(image="")), None)

    error = caught.value
    assert (error.code, error.reason) == (403, "Forbidden")
    assert error.message == (
        'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
        "[spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1, "
        "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: "
        "Required value: must be required]"
    )
    assert [c["field"] for c in (error.details or {})["causes"]] == [
        "spec.pytorchReplicaSpecs[Master].replicas",
        "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image",
    ]


def test_field_types_are_checked_like_the_crd_schema() -> None:
    body = job(Worker=replica(replicas="2"))
    body["spec"]["runPolicy"] = {"backoffLimit": "3", "suspend": "yes"}
    assert messages(schema_errors(body)) == [
        'spec.pytorchReplicaSpecs.Worker.replicas: Invalid value: "string": '
        'spec.pytorchReplicaSpecs.Worker.replicas in body must be of type integer: "string"',
        'spec.runPolicy.backoffLimit: Invalid value: "string": '
        'spec.runPolicy.backoffLimit in body must be of type integer: "string"',
        'spec.runPolicy.suspend: Invalid value: "string": '
        'spec.runPolicy.suspend in body must be of type boolean: "string"',
    ]
    with pytest.raises(errors.StatusError) as caught:
        admit_pytorchjob(body, None)
    assert (caught.value.code, caught.value.reason) == (422, "Invalid")
