"""TrainJob + runtime -> JobSet, as Kubeflow Trainer's runtime framework and torch plugin render it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.render import (
    merge_resources,
    nproc_per_node,
    render_jobset,
    upsert_env,
)
from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.runtimes import TORCH_IMAGE, torch_distributed

Obj = dict[str, Any]
INDEX_REF = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def trainjob(name: str = "tj", **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ns", "uid": "uid-1"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": False, **spec},
    }


def node_job(jobset: Obj) -> Obj:
    return next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node")  # type: ignore[no-any-return]


def node_container(jobset: Obj) -> Obj:
    return node_job(jobset)["template"]["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def test_two_nodes_on_the_default_runtime() -> None:
    trainer = {
        "numNodes": 2,
        "image": "img:1",
        "command": ["torchrun", "train.py"],
        "args": ["--epochs", "3"],
    }
    jobset = render_jobset(trainjob("mnist", trainer=trainer), torch_distributed())

    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert jobset["metadata"]["name"] == "mnist"
    assert jobset["metadata"]["namespace"] == "ns"
    assert jobset["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "mnist",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert jobset["spec"]["suspend"] is False
    job = node_job(jobset)
    assert job["replicas"] == 1
    assert job["template"]["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    assert (job["template"]["spec"]["parallelism"], job["template"]["spec"]["completions"]) == (2, 2)
    container = node_container(jobset)
    assert container["name"] == "node"
    assert (container["image"], container["command"], container["args"]) == (
        "img:1",
        ["torchrun", "train.py"],
        ["--epochs", "3"],
    )
    assert container["env"] == [
        {"name": "PET_NNODES", "value": "2"},
        {"name": "PET_NPROC_PER_NODE", "value": "1"},
        {"name": "PET_NODE_RANK", "valueFrom": INDEX_REF},
        {"name": "PET_MASTER_ADDR", "value": "mnist-node-0-0.mnist"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
    ]
    assert container["ports"] == [{"containerPort": 29500}]


def test_runtime_defaults_apply_without_trainer_overrides() -> None:
    """Without ``spec.trainer`` the runtime's image stays and no PET_* is injected (upstream needs the
    trainer to find the container to inject into)."""
    jobset = render_jobset(trainjob(), torch_distributed())
    container = node_container(jobset)
    assert container == {"name": "node", "image": TORCH_IMAGE}
    assert node_job(jobset)["template"]["spec"]["parallelism"] == 1


def test_runtime_is_not_modified() -> None:
    runtime = torch_distributed()
    before = copy.deepcopy(runtime)
    render_jobset(trainjob(trainer={"numNodes": 3, "env": [{"name": "A", "value": "1"}]}), runtime)
    assert runtime == before


def test_suspend_and_template_metadata_propagate() -> None:
    runtime = torch_distributed()
    runtime["spec"]["template"]["metadata"] = {"labels": {"team": "ml"}, "annotations": {"note": "x"}}
    jobset = render_jobset(trainjob(suspend=True, trainer={}), runtime)
    assert jobset["spec"]["suspend"] is True
    assert jobset["metadata"]["labels"] == {"team": "ml"}
    assert jobset["metadata"]["annotations"] == {"note": "x"}


def test_trainer_env_merges_into_the_runtime_env_before_pet() -> None:
    runtime = torch_distributed()
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "KEEP", "value": "runtime"},
        {"name": "OVERRIDE", "value": "runtime"},
    ]
    env = [{"name": "OVERRIDE", "value": "job"}, {"name": "NEW", "value": "job"}]
    names = [e["name"] for e in node_container(render_jobset(trainjob(trainer={"env": env}), runtime))["env"]]
    assert names[:3] == ["KEEP", "OVERRIDE", "NEW"]
    rendered = node_container(render_jobset(trainjob(trainer={"env": env}), runtime))["env"]
    assert rendered[1] == {"name": "OVERRIDE", "value": "job"}
    assert names[3:] == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]


def test_resources_per_node_merge_into_the_node_container() -> None:
    runtime = torch_distributed()
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"memory": "4Gi"},
        "requests": {"cpu": "1"},
    }
    trainer = {"resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"cpu": "4"}}}
    container = node_container(render_jobset(trainjob(trainer=trainer), runtime))
    assert container["resources"] == {
        "limits": {"memory": "4Gi", "nvidia.com/gpu": "2"},
        "requests": {"cpu": "4"},
    }
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PET_NPROC_PER_NODE"] == "auto"  # a GPU node keeps torchrun's "auto"


@pytest.mark.parametrize(
    ("trainer", "runtime_resources", "expected"),
    [
        ({}, {}, "1"),
        ({"numProcPerNode": 4}, {}, "4"),
        ({"resourcesPerNode": {"requests": {"cpu": "3"}}}, {}, "3"),
        ({"resourcesPerNode": {"requests": {"cpu": "500m"}}}, {}, "1"),
        ({"resourcesPerNode": {"requests": {"cpu": "2500m"}}}, {}, "3"),
        ({"resourcesPerNode": {"limits": {"cpu": "6"}}}, {}, "6"),
        ({}, {"requests": {"cpu": "2"}}, "2"),
        ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}}, {"requests": {"cpu": "8"}}, "auto"),
        ({}, {"limits": {"amd.com/gpu": "1"}}, "auto"),
        ({"numProcPerNode": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}}, {}, "2"),
    ],
)
def test_nproc_per_node_follows_the_torch_plugin(trainer: Obj, runtime_resources: Obj, expected: str) -> None:
    assert nproc_per_node(trainer, runtime_resources) == expected


def test_initializers_get_storage_uri_env_and_secret() -> None:
    runtime = torch_distributed()
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    for step in ("dataset-initializer", "model-initializer"):
        jobs.insert(
            0,
            {
                "name": step,
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                    "spec": {"template": {"spec": {"containers": [{"name": step, "image": "init"}]}}},
                },
            },
        )
    initializer = {
        "dataset": {
            "storageUri": "hf://data",
            "env": [{"name": "X", "value": "1"}],
            "secretRef": {"name": "creds"},
        },
        "model": {"storageUri": "s3://bucket/model"},
    }
    jobset = render_jobset(trainjob(initializer=initializer, trainer={}), runtime)
    by_name = {r["name"]: r for r in jobset["spec"]["replicatedJobs"]}
    dataset = by_name["dataset-initializer"]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert dataset["env"] == [{"name": "STORAGE_URI", "value": "hf://data"}, {"name": "X", "value": "1"}]
    assert dataset["envFrom"] == [{"secretRef": {"name": "creds"}}]
    model = by_name["model-initializer"]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert model["env"] == [{"name": "STORAGE_URI", "value": "s3://bucket/model"}]
    assert by_name["model-initializer"]["replicas"] == 1
    assert by_name["dataset-initializer"]["template"]["spec"]["completions"] == 1


def test_plain_runtime_sets_nodes_and_env_without_pet() -> None:
    runtime = torch_distributed()
    runtime["spec"]["mlPolicy"] = {"numNodes": 3}
    container = node_container(
        render_jobset(trainjob(trainer={"env": [{"name": "A", "value": "b"}]}), runtime)
    )
    assert container["env"] == [{"name": "A", "value": "b"}]
    assert "ports" not in container


def test_upsert_env_and_merge_resources() -> None:
    env = [{"name": "A", "value": "1"}]
    upsert_env(env, {"name": "A", "value": "2"}, {"name": "B", "value": "3"})
    assert env == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert merge_resources({"limits": {"cpu": "1"}}, {"requests": {"cpu": "2"}}) == {
        "limits": {"cpu": "1"},
        "requests": {"cpu": "2"},
    }


def security_patch(manager: str = "example.com/airflow") -> Obj:
    pod = {
        "serviceAccountName": "trainer",
        "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}],
        "containers": [{"name": "node", "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]}],
    }
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": {"team": "ml"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {"template": {"metadata": {"labels": {"p": "1"}}, "spec": pod}}
                            },
                        }
                    ]
                },
            }
        },
    }


def test_runtime_patches_merge_into_the_template() -> None:
    jobset = render_jobset(
        trainjob(runtimePatches=[security_patch()], trainer={"numNodes": 2}), torch_distributed()
    )
    assert jobset["metadata"]["labels"] == {"team": "ml"}
    pod = node_job(jobset)["template"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {"p": "1"}
    assert pod["spec"]["serviceAccountName"] == "trainer"
    assert pod["spec"]["volumes"] == [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    container = pod["spec"]["containers"][0]
    assert container["image"] == TORCH_IMAGE  # merged by name, not replaced
    assert container["volumeMounts"] == [{"name": "ckpt", "mountPath": "/ckpt"}]
    assert {e["name"] for e in container["env"]} >= {"PET_NNODES", "PET_MASTER_ADDR"}
