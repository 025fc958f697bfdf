"""Kubeflow Trainer v2 on the local cluster: a TrainJob rendered into a JobSet of Indexed Jobs whose pods
really train together (gloo all-reduce across two nodes), and its failure paths."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from .pod_helpers import read_log
from .trainjob_helpers import (
    ALL_REDUCE,
    condition,
    condition_history,
    create_trainjob,
    get_jobset,
    is_true,
    trainjob,
    watch_trainjob,
)

pytest.importorskip("torch")


@pytest.fixture()
def custom(api_client: client.ApiClient) -> Iterator[client.CustomObjectsApi]:
    yield client.CustomObjectsApi(api_client)


def test_two_node_trainjob_all_reduces_over_gloo(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    created = create_trainjob(custom, namespace, trainjob("allreduce", ALL_REDUCE, trainer={"numNodes": 2}))
    versions = watch_trainjob(
        custom, namespace, "allreduce", is_true("Complete"), since=created["metadata"]["resourceVersion"]
    )

    assert condition_history(versions)[-1] == "Complete=True"
    done = versions[-1]
    complete = condition(done, "Complete")
    assert complete is not None
    assert (complete["reason"], complete["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    assert done["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]

    jobset = get_jobset(custom, namespace, "allreduce")
    owner = jobset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "allreduce", True)
    assert jobset["status"]["terminalState"] == "Completed"
    node = jobset["spec"]["replicatedJobs"][0]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["PET_NNODES"] == "2"
    assert env["PET_NPROC_PER_NODE"] == "1"
    assert env["PET_MASTER_ADDR"] == "allreduce-node-0-0.allreduce"
    assert env["PET_MASTER_PORT"] == "29500"
    assert env["PET_NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }

    job = batch.read_namespaced_job("allreduce-node-0", namespace)
    assert (job.spec.parallelism, job.spec.completions, job.spec.completion_mode) == (2, 2, "Indexed")
    assert job.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == "allreduce"
    assert job.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert job.metadata.owner_references[0].kind == "JobSet"

    service = core.read_namespaced_service("allreduce", namespace)
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector == {"jobset.sigs.k8s.io/jobset-name": "allreduce"}

    pods = core.list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=allreduce").items
    by_index = {p.metadata.annotations["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert sorted(by_index) == ["0", "1"]
    for index, pod in by_index.items():
        assert pod.spec.hostname == f"allreduce-node-0-{index}"
        assert pod.spec.subdomain == "allreduce"
        log = read_log(core, namespace, pod.metadata.name)
        assert f"rank={index} world=2 nproc=1" in log
        assert "all_reduce=3 world_size=2" in log
