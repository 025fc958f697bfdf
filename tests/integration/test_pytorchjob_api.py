"""PyTorchJob admission and the objects the controller creates: defaults, webhook denials, pods, headless
Services, labels, ownerReferences and the distributed environment (checked inside the processes)."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.cluster_fixtures import wait_for

from .pytorchjob_helpers import (
    PRINT_ENV,
    SLEEP,
    api_error,
    create,
    env_lines,
    get,
    is_true,
    job_body,
    read_log,
    replica,
    wait_job,
)

WEBHOOK = 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '


def test_defaults_are_stored(custom: client.CustomObjectsApi, namespace: str) -> None:
    body = job_body("defaults", replica(SLEEP), replica(SLEEP, replicas=None), runPolicy={"suspend": True})

    created = create(custom, namespace, body)

    spec = created["spec"]
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    assert (worker["replicas"], worker["restartPolicy"]) == (1, "OnFailure")
    assert spec["pytorchReplicaSpecs"]["Master"]["restartPolicy"] == "OnFailure"
    assert spec["runPolicy"] == {"suspend": True, "cleanPodPolicy": "None"}
    assert spec["nprocPerNode"] == "auto"
    ports = worker["template"]["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "pytorchjob-port", "containerPort": 23456}]
    assert get(custom, namespace, "defaults")["spec"] == spec


@pytest.mark.parametrize(
    ("name", "master", "worker", "message"),
    [
        (
            "no-master-replicas",
            replica(SLEEP, replicas=None),
            None,
            "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
        ),
        (
            "two-masters",
            replica(SLEEP, replicas=2),
            None,
            "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
        ),
        (
            "no-image",
            replica(SLEEP, image=""),
            None,
            "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].image: "
            "Required value: must be required",
        ),
        (
            "no-pytorch-container",
            replica(SLEEP, name="trainer"),
            None,
            "spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: "
            "must have at least one container with name pytorch",
        ),
        (
            "0-starts-with-digit",
            replica(SLEEP),
            None,
            'metadata.name: Invalid value: "0-starts-with-digit": should match: '
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an "
            "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
            "'[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
    ],
)
def test_webhook_denies_invalid_jobs(
    custom: client.CustomObjectsApi,
    namespace: str,
    name: str,
    master: dict,
    worker: dict | None,
    message: str,
) -> None:
    with pytest.raises(client.ApiException) as caught:
        create(custom, namespace, job_body(name, master, worker))

    status = api_error(caught.value)
    assert (caught.value.status, status["reason"]) == (403, "Forbidden")
    assert status["message"] == WEBHOOK + message


def test_several_problems_are_aggregated_and_types_are_checked_first(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    body = job_body("many", replica(SLEEP, replicas=3), None)
    body["spec"]["pytorchReplicaSpecs"]["Chief"] = replica(SLEEP)
    with pytest.raises(client.ApiException) as caught:
        create(custom, namespace, body)
    assert api_error(caught.value)["message"] == WEBHOOK + (
        "[spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1, "
        'spec.pytorchReplicaSpecs[Chief]: Unsupported value: "Chief": supported values: "Master", "Worker"]'
    )

    body = job_body("typed", replica(SLEEP, replicas="1"), None)  # type: ignore[arg-type]
    with pytest.raises(client.ApiException) as caught:
        create(custom, namespace, body)
    status = api_error(caught.value)
    assert (caught.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'PyTorchJob.kubeflow.org "typed" is invalid: spec.pytorchReplicaSpecs.Master.replicas: '
        'Invalid value: "string": spec.pytorchReplicaSpecs.Master.replicas in body must be of type '
        'integer: "string"'
    )


def test_pods_services_labels_and_environment(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    body = job_body("env", replica(PRINT_ENV), replica(PRINT_ENV, replicas=2, restart="ExitCode"))
    job = create(custom, namespace, body)
    done = wait_job(custom, namespace, "env", is_true("Succeeded"))
    # The job succeeds with its Master; cleanPodPolicy None lets the Workers finish on their own.
    wait_for(
        lambda: all(p.status.phase == "Succeeded" for p in core.list_namespaced_pod(namespace).items),
        what="every replica to finish",
    )

    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    assert sorted(pods) == ["env-master-0", "env-worker-0", "env-worker-1"]
    master_ip = pods["env-master-0"].status.pod_ip
    for name, rtype, index, rank in (
        ("env-master-0", "master", 0, 0),
        ("env-worker-0", "worker", 0, 1),
        ("env-worker-1", "worker", 1, 2),
    ):
        pod = pods[name]
        expected_labels = {
            "training.kubeflow.org/job-name": "env",
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
        }
        if rtype == "master":
            expected_labels["training.kubeflow.org/job-role"] = "master"
        assert pod.metadata.labels == expected_labels
        owner = pod.metadata.owner_references[0]
        assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
            "kubeflow.org/v1",
            "PyTorchJob",
            "env",
            job["metadata"]["uid"],
        )
        assert owner.controller and owner.block_owner_deletion
        assert pod.spec.restart_policy == ("OnFailure" if rtype == "master" else "Never")  # ExitCode -> Never
        assert env_lines(read_log(core, namespace, name)) == {
            "MASTER_ADDR": master_ip,
            "PET_MASTER_ADDR": master_ip,
            "MASTER_PORT": "23456",
            "PET_MASTER_PORT": "23456",
            "WORLD_SIZE": "3",
            "RANK": str(rank),
            "PET_NODE_RANK": str(rank),
            "PET_NPROC_PER_NODE": "auto",
            "PET_NNODES": "3",
            "PYTHONUNBUFFERED": "0",
        }

    services = {s.metadata.name: s for s in core.list_namespaced_service(namespace).items}
    assert sorted(services) == sorted(pods)
    worker_svc = services["env-worker-1"]
    assert worker_svc.spec.cluster_ip == "None"
    assert worker_svc.spec.selector == {k: v for k, v in pods["env-worker-1"].metadata.labels.items()}
    assert [(p.name, p.port) for p in worker_svc.spec.ports] == [("pytorchjob-port", 23456)]
    assert worker_svc.metadata.owner_references[0].uid == job["metadata"]["uid"]

    statuses = done["status"]["replicaStatuses"]
    assert statuses["Master"] == {
        "succeeded": 1,
        "selector": "training.kubeflow.org/job-name=env,"
        "training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=master",
    }
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=env").items
    created = {e.message for e in events if e.reason == "SuccessfulCreatePod"}
    assert created == {"Created pod: env-master-0", "Created pod: env-worker-0", "Created pod: env-worker-1"}
    assert all(e.source.component == "pytorchjob-controller" for e in events)
