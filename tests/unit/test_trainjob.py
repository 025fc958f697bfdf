"""The Kubeflow Trainer v2 TrainJob kind, pure: what ``TrainJobOperator`` renders, what it refuses before
anything is created (with the argument's name), how a TrainJob's status reads, and how its nodes are named
in logs. Upstream semantics: ``kubeflow/trainer`` v2.3 ``pkg/apis/trainer/v1alpha1/trainjob_types.go``, the
JobSet plugin, the torch plugin; ``kubernetes-sigs/jobset`` labels and condition reasons."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s.kinds import kind_facts
from airflow_k8s_ml.kube.resources import pod_selector, replica_name, resource_for
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.manifests.pod import PodTemplate
from airflow_k8s_ml.manifests.trainjob import TrainJobSpec
from airflow_k8s_ml.manifests.trainjob_rules import check_trainjob_fields
from airflow_k8s_ml.operators import TrainJobOperator
from airflow_k8s_ml.sensors import TrainingJobSensor
from airflow_k8s_ml.status import classify, deadline_phase
from airflow_k8s_ml.status.pod import owned_by
from airflow_k8s_ml.workloads.distributed import DistContext, context_from_env

KEY = RunKey("nightly", "finetune", "scheduled__2024-05-01T00:00:00+00:00")


def render(op: TrainJobOperator, *, resume_uri: str | None = None, **overrides: Any) -> dict[str, Any]:
    """What ``execute`` would create, after templating (``overrides``: rendered template fields)."""
    for name, value in overrides.items():
        setattr(op, name, value)
    args = op._arguments(op.manifest)
    return op._render_object(args, op._placement(args, KEY, "ml", resume_uri))


def trainjob(**kwargs: Any) -> TrainJobOperator:
    return TrainJobOperator(task_id="finetune", image="trainer:1", command=["python", "-m", "ft"], **kwargs)


def node_patch(obj: dict[str, Any]) -> dict[str, Any]:
    (patch,) = obj["spec"]["runtimePatches"]
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == "node"
    return job


def env(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in items}


# --- render -------------------------------------------------------------------------------------------


def test_default_render_is_a_torch_distributed_trainjob_with_our_name_and_labels() -> None:
    obj = render(trainjob(num_nodes="{{ params.workers }}", checkpoint_uri="s3://m/ft"), num_nodes="2")
    assert obj["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and obj["kind"] == "TrainJob"
    meta = obj["metadata"]
    assert meta["name"] == KEY.workload_name("TrainJob") and len(meta["name"]) <= 33
    assert meta["labels"]["airflow-k8s-ml/task-id"] == "finetune"
    assert meta["annotations"]["airflow-k8s-ml/run-id"] == KEY.run_id
    spec = obj["spec"]
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert spec["trainer"]["image"] == "trainer:1" and spec["trainer"]["command"] == ["python", "-m", "ft"]
    assert spec["trainer"]["numNodes"] == 2  # rendered text converted
    assert env(spec["trainer"]["env"]) == {"CHECKPOINT_URI": "s3://m/ft"}
    assert "suspend" not in spec and "managedBy" not in spec and "activeDeadlineSeconds" not in spec


def test_run_labels_reach_the_jobset_the_job_and_the_pods_through_our_runtime_patch() -> None:
    obj = render(trainjob(labels={"team": "ml"}))
    (patch,) = obj["spec"]["runtimePatches"]
    assert patch["manager"] == "airflow-k8s-ml/operator"
    ours = KEY.labels()
    template = patch["trainingRuntimeSpec"]["template"]
    job = node_patch(obj)
    pod_meta = job["template"]["spec"]["template"]["metadata"]
    for labels in (template["metadata"]["labels"], job["template"]["metadata"]["labels"], pod_meta["labels"]):
        assert {k: labels[k] for k in ours} == ours
    assert obj["metadata"]["labels"]["team"] == "ml" and "team" not in pod_meta["labels"]


def test_our_restrictive_security_defaults_go_to_the_node_pods_and_container() -> None:
    pod = node_patch(render(trainjob()))["template"]["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    assert container == {
        "name": "node",
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    bare = node_patch(render(trainjob(pod_security_context={}, container_security_context={})))
    assert "spec" not in bare["template"]["spec"]["template"]


def test_pod_arguments_split_between_trainer_and_runtime_patch() -> None:
    obj = render(
        trainjob(
            args=["--resume-from", "{{ resume_from }}"],
            env={"EPOCHS": 3},
            secret_env={"HF_TOKEN": "hf:token"},
            gpus=2,
            requests={"cpu": "4"},
            node_selector={"pool": "gpu"},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            image_pull_secrets=["registry"],
            volumes=[{"name": "data", "mount_path": "/data", "pvc": "datasets"}],
            shm_size="2Gi",
            service_account="trainer",
            resume_from="s3://m/ft/step-3/",
        ),
        resume_uri="s3://m/ft/step-3/",
    )
    trainer = obj["spec"]["trainer"]
    assert trainer["args"] == ["--resume-from", "s3://m/ft/step-3/"]
    assert env(trainer["env"]) == {
        "RESUME_FROM": "s3://m/ft/step-3/",
        "EPOCHS": "3",
        "HF_TOKEN": {"secretKeyRef": {"name": "hf", "key": "token"}},
    }
    assert trainer["resourcesPerNode"] == {
        "requests": {"cpu": "4", "nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    pod = node_patch(obj)["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu"} and pod["serviceAccountName"] == "trainer"
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert {v["name"] for v in pod["volumes"]} == {"data", "dshm"}
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"/data", "/dev/shm"}


def test_resources_per_node_are_requests_and_limits_including_gpus() -> None:
    obj = render(trainjob(resources_per_node={"cpu": 4, "memory": "16Gi", "nvidia.com/gpu": 1}))
    resources = obj["spec"]["trainer"]["resourcesPerNode"]
    assert (
        resources["requests"] == resources["limits"] == {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    )


def test_runtime_initializers_counts_deadline_and_kueue() -> None:
    obj = render(
        trainjob(
            runtime="torchtune-llama3.2-1b",
            runtime_kind="TrainingRuntime",
            num_nodes=4,
            num_proc_per_node=8,
            dataset_initializer={"storage_uri": "hf://tatsu-lab/alpaca", "env": {"SPLIT": "train"}},
            model_initializer={"storage_uri": "hf://meta-llama/Llama-3.2-1B", "secret": "hf-token"},
            active_deadline_seconds=3600,
            queue_name="gpu",
        )
    )
    spec = obj["spec"]
    assert (
        spec["runtimeRef"]["name"] == "torchtune-llama3.2-1b"
        and spec["runtimeRef"]["kind"] == "TrainingRuntime"
    )
    assert spec["trainer"]["numNodes"] == 4 and spec["trainer"]["numProcPerNode"] == 8
    assert spec["initializer"] == {
        "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "SPLIT", "value": "train"}]},
        "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B", "secretRef": {"name": "hf-token"}},
    }
    assert spec["activeDeadlineSeconds"] == 3600
    assert spec["suspend"] is True and obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"


def test_suspend_without_a_queue() -> None:
    assert render(trainjob(suspend=True))["spec"]["suspend"] is True


# --- refused before anything is created, naming the argument ---------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"pod_options": {"working_dir": "/w"}}, "working_dir", "workingDir"),
        ({"pod_options": {"priority_class_name": "high"}}, "priority_class_name", "priorityClassName"),
        ({"env": {"PET_NNODES": "3"}}, "env[PET_NNODES]", "reserved"),
        ({"secret_env": {"PET_MASTER_ADDR": "s:k"}}, "secret_env[PET_MASTER_ADDR]", "reserved"),
        ({"num_nodes": 0}, "num_nodes", ">= 1"),
        ({"num_nodes": "two"}, "num_nodes", "integer"),
        ({"num_proc_per_node": 0}, "num_proc_per_node", ">= 1"),
        ({"runtime": "Torch Distributed"}, "runtime", ""),
        ({"runtime_kind": "Runtime"}, "runtime_kind", "ClusterTrainingRuntime"),
        ({"resources_per_node": {"cpu": 1}, "requests": {"cpu": "2"}}, "resources_per_node", "requests"),
        ({"resources_per_node": {"nvidia.com/gpu": "0.5"}}, "requests[nvidia.com/gpu]", "whole"),
        ({"dataset_initializer": {"storage_uri": "alpaca"}}, "dataset_initializer[storage_uri]", "URI"),
        ({"model_initializer": {"uri": "hf://m"}}, "model_initializer[uri]", "storage_uri"),
        ({"model_initializer": {"secret": "Bad_Secret"}}, "model_initializer[secret]", ""),
        ({"active_deadline_seconds": 0}, "active_deadline_seconds", ">= 1"),
        ({"queue_name": "gpu", "suspend": False}, "suspend", "Kueue"),
        ({"env": {"CHECKPOINT_URI": "x"}, "checkpoint_uri": "s3://m/ft"}, "env[CHECKPOINT_URI]", "operator"),
    ],
    ids=lambda value: str(value) if isinstance(value, str) else "",
)
def test_bad_arguments_fail_at_parse_time_naming_the_argument(
    overrides: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as info:
        trainjob(**overrides)
    assert info.value.field == field
    assert words in info.value.message


def test_a_templated_num_nodes_is_judged_once_rendered() -> None:
    op = trainjob(num_nodes="{{ params.workers }}")  # fine at parse time
    with pytest.raises(ValidationError, match="num_nodes"):
        render(op, num_nodes="0")


@pytest.mark.parametrize(
    "arguments",
    [
        {"num_nodes": 0},
        {"runtime_kind": "X"},
        {"dataset_initializer": {"storage_uri": 1}},
        {"suspend": "yes"},
    ],
    ids=lambda a: ",".join(sorted(a)),
)
def test_bad_trainjob_arguments_fail_the_same_in_the_rules_and_the_spec(arguments: dict[str, Any]) -> None:
    def error_of(call: Any, **kwargs: Any) -> tuple[str, str]:
        with pytest.raises(ValidationError) as info:
            call(**kwargs)
        return info.value.field, info.value.message

    assert error_of(check_trainjob_fields, values=arguments) == error_of(
        TrainJobSpec, trainer=PodTemplate(image="x"), **arguments
    )


# --- the raw manifest escape hatch ------------------------------------------------------------------------

RAW = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "mine", "labels": {"kueue.x-k8s.io/queue-name": "gpu"}},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {
            "image": "t:1",
            "numNodes": 2,
            "args": ["{{ resume_from }}"],
            "env": [{"name": "A", "value": "1"}],
        },
    },
}


def test_a_raw_trainjob_is_named_labelled_queued_and_gets_the_injected_env() -> None:
    op = TrainJobOperator(task_id="finetune", manifest=RAW, checkpoint_uri="s3://m/ft")
    obj = render(op, resume_uri="s3://m/ft/step-2/")
    assert obj["metadata"]["name"] == KEY.workload_name("TrainJob")
    assert obj["metadata"]["labels"]["airflow-k8s-ml/task-id"] == "finetune"
    assert obj["spec"]["suspend"] is True  # Kueue label: created suspended
    trainer = obj["spec"]["trainer"]
    assert env(trainer["env"]) == {
        "CHECKPOINT_URI": "s3://m/ft",
        "RESUME_FROM": "s3://m/ft/step-2/",
        "A": "1",
    }
    assert trainer["args"] == ["s3://m/ft/step-2/"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"trainer": {"image": "t:1"}}, "manifest.spec.runtimeRef.name"),
        (
            {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 0}},
            "manifest.spec.trainer.numNodes",
        ),
        (
            {"runtimeRef": {"name": "torch-distributed", "kind": "Runtime"}},
            "manifest.spec.runtimeRef.kind",
        ),
        (
            {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"env": [{"name": "PET_NODE_RANK"}]}},
            "manifest.spec.trainer.env[PET_NODE_RANK]",
        ),
        (
            {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": "0.5"}}},
            },
            "manifest.spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]",
        ),
        (
            {"runtimeRef": {"name": "torch-distributed"}, "activeDeadlineSeconds": 0},
            "manifest.spec.activeDeadlineSeconds",
        ),
    ],
)
def test_a_bad_raw_trainjob_is_refused_at_parse_time_with_its_path(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        TrainJobOperator(task_id="t", manifest={**RAW, "spec": spec})
    assert info.value.field == field


def test_a_raw_trainjob_may_not_set_an_injected_variable() -> None:
    manifest = {
        **RAW,
        "spec": {**RAW["spec"], "trainer": {"env": [{"name": "CHECKPOINT_URI", "value": "x"}]}},
    }
    with pytest.raises(ValidationError) as info:
        TrainJobOperator(task_id="t", manifest=manifest, checkpoint_uri="s3://m/ft")
    assert info.value.field == "spec.trainer.env[CHECKPOINT_URI]"  # as for the other kinds' containers


# --- status -----------------------------------------------------------------------------------------------


def tj(
    conditions: list[dict[str, Any]], *, suspend: bool | None = None, jobs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-distributed"}}
    if suspend is not None:
        spec["suspend"] = suspend
    status: dict[str, Any] = {"conditions": conditions}
    if jobs is not None:
        status["jobsStatus"] = jobs
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": spec, "status": status}


def cond(type_: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


NODE = {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}


def test_a_new_trainjob_is_pending_and_a_running_jobset_is_running() -> None:
    state = classify({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {}})
    assert state.phase == "pending" and state.reason == "Pending"
    running = classify(tj([], jobs=[NODE]))
    assert running.phase == "running" and running.details["jobsStatus"]["node"]["active"] == 1


def test_suspended_is_admission_from_spec_or_condition_and_resumed_is_not() -> None:
    for obj in (
        tj([], suspend=True),
        tj([cond("Suspended", "Suspended", "TrainJob is suspended")], suspend=True),
    ):
        state = classify(obj)
        assert (state.phase, state.reason, state.message) == ("pending", "Suspended", "TrainJob is suspended")
        assert deadline_phase(state, []) == "admission"
    resumed = classify(tj([cond("Suspended", "Resumed", "TrainJob is resumed", "False")], jobs=[NODE]))
    assert resumed.phase == "running"


def test_complete_and_failed_carry_upstreams_jobset_reasons() -> None:
    done = classify(tj([cond("Complete", "AllJobsCompleted", "jobset completed successfully")]))
    assert (done.phase, done.reason, done.message) == (
        "succeeded",
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    failed = classify(tj([cond("Failed", "FailedJobs", "jobset failed due to one or more job failures")]))
    assert (failed.phase, failed.reason) == ("failed", "FailedJobs")
    deadline = classify(
        tj(
            [
                cond("Complete", "AllJobsCompleted", "jobset completed successfully"),
                cond("Failed", "DeadlineExceeded", "TrainJob exceeded its active deadline"),
            ]
        )
    )
    assert (deadline.phase, deadline.reason) == ("failed", "DeadlineExceeded")  # Failed wins


def test_another_groups_trainjob_is_not_ours() -> None:
    with pytest.raises(ValidationError):
        classify({"apiVersion": "example.com/v1", "kind": "TrainJob"})


# --- nodes: pods, names in logs, kind facts -----------------------------------------------------------------


def node_pod(index: int, job_index: str = "0", rjob: str = "node") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"tj-{rjob}-{job_index}-{index}-abcde",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "tj",
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/job-index": job_index,
                "batch.kubernetes.io/job-completion-index": str(index),
            },
            "ownerReferences": [{"kind": "Job", "name": f"tj-{rjob}-{job_index}", "uid": "job-uid"}],
        }
    }


def test_node_pods_are_named_by_replicated_job_and_rank_and_count_as_the_trainjobs() -> None:
    assert [replica_name(node_pod(i)) for i in range(2)] == ["node-0", "node-1"]
    assert replica_name(node_pod(0, rjob="dataset-initializer")) == "dataset-initializer-0"
    assert replica_name(node_pod(3, job_index="1")) == "node-1-3"
    assert owned_by(node_pod(0), "trainjob-uid")  # owned by its Job, two owners below the TrainJob
    assert pod_selector("TrainJob", "tj") == "jobset.sigs.k8s.io/jobset-name=tj"


def test_the_kind_row_gives_the_rest_resource_name_rule_and_sensor() -> None:
    facts = kind_facts("TrainJob")
    assert facts is not None and facts.training and facts.dns1035
    res = resource_for(None, "TrainJob")
    assert res.collection_path("ml") == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs"
    longest = RunKey("d" * 80, "t" * 80, "r").workload_name("TrainJob")
    # JobSet refuses a name whose longest pod name <name>-dataset-initializer-0-0-<5> exceeds 63
    assert len(f"{longest}-dataset-initializer-0-0-abcde") <= 63
    TrainingJobSensor(task_id="wait", name="tj", kind="TrainJob")


# --- the workload reads a TrainJob node's environment ------------------------------------------------------


def test_pet_variables_give_the_ddp_context_for_one_process_per_node() -> None:
    pet = {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": "1",
        "PET_MASTER_ADDR": "tj-node-0-0.tj",
        "PET_MASTER_PORT": "29400",
    }
    assert context_from_env(pet) == DistContext(2, 1, "tj-node-0-0.tj", 29400)
    assert context_from_env({**pet, "PET_NNODES": "1", "PET_NODE_RANK": "0"}) == DistContext()
    torchrun = {
        **pet,
        "PET_NPROC_PER_NODE": "2",
        "WORLD_SIZE": "4",
        "RANK": "3",
        "MASTER_ADDR": "a",
        "MASTER_PORT": "1",
    }
    assert context_from_env(torchrun) == DistContext(4, 3, "a", 1)  # under torchrun its variables win
    with pytest.raises(ValidationError, match="torchrun"):
        context_from_env({**pet, "PET_NPROC_PER_NODE": "2"})
