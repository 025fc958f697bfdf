"""Pods and Services built for PyTorchJob replicas: names, labels, env, restart policy."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.pytorchjob.admission import set_defaults
from airflow_k8s_ml.testbed.local_cluster.controllers.pytorchjob.pods import (
    build_pod,
    build_service,
    env_value,
    pod_env,
)


def job(worker_policy: str = "OnFailure", workers: int = 2, **spec: Any) -> dict[str, Any]:
    def replica(replicas: int, policy: str) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": policy,
            "template": {
                "metadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
                "spec": {
                    "containers": [
                        {"name": "pytorch", "image": "img", "env": [{"name": "USER_VAR", "value": "1"}]},
                        {"name": "sidecar", "image": "img"},
                    ]
                },
            },
        }

    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml", "uid": "uid-1"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": replica(1, "OnFailure"),
                "Worker": replica(workers, worker_policy),
            },
            **spec,
        },
    }
    set_defaults(body)
    return body


def names(env: list[dict[str, str]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in env}


def test_worker_env_ranks_after_the_master() -> None:
    env = pod_env(job(), "Worker", 1, "127.42.0.7")
    assert [e["name"] for e in env] == [
        "PYTHONUNBUFFERED",
        "MASTER_PORT",
        "PET_MASTER_PORT",
        "MASTER_ADDR",
        "PET_MASTER_ADDR",
        "WORLD_SIZE",
        "RANK",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_NNODES",
    ]
    assert names(env) == {
        "PYTHONUNBUFFERED": "0",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "MASTER_ADDR": "127.42.0.7",
        "PET_MASTER_ADDR": "127.42.0.7",
        "WORLD_SIZE": "3",
        "RANK": "2",
        "PET_NPROC_PER_NODE": "auto",
        "PET_NODE_RANK": "2",
        "PET_NNODES": "3",
    }


def test_world_size_multiplies_an_integer_nproc_per_node() -> None:
    env = names(pod_env(job(nprocPerNode="4"), "Master", 0, "10.0.0.1"))
    assert (env["WORLD_SIZE"], env["RANK"], env["PET_NPROC_PER_NODE"]) == ("12", "0", "4")


def test_without_a_master_only_the_node_count_is_set() -> None:
    body = job()
    del body["spec"]["pytorchReplicaSpecs"]["Master"]
    assert names(pod_env(body, "Worker", 0, "")) == {"PYTHONUNBUFFERED": "0", "PET_NNODES": "2"}


def test_master_pod_shape() -> None:
    pod = build_pod(job(), "Master", 0, "127.42.0.9")

    meta = pod["metadata"]
    assert (meta["name"], meta["namespace"], meta["annotations"]) == ("train-master-0", "ml", {"a": "b"})
    assert meta["labels"] == {
        "team": "ml",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "train",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "train",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    for container in pod["spec"]["containers"]:  # every container gets the environment
        assert (
            env_value({"spec": {"containers": [dict(container, name="pytorch")]}}, "MASTER_ADDR")
            == "127.42.0.9"
        )
    assert pod["spec"]["containers"][0]["env"][0] == {"name": "USER_VAR", "value": "1"}


def test_exit_code_replicas_run_with_restart_policy_never() -> None:
    pod = build_pod(job(worker_policy="ExitCode"), "Worker", 1, "127.42.0.9")
    assert pod["spec"]["restartPolicy"] == "Never"
    assert "training.kubeflow.org/job-role" not in pod["metadata"]["labels"]


def test_service_is_headless_and_selects_its_replica() -> None:
    service = build_service(job(), "Worker", 1)
    assert service["metadata"]["name"] == "train-worker-1"
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "train",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "1",
        },
        "ports": [{"name": "pytorchjob-port", "port": 23456}],
    }
