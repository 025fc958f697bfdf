from __future__ import annotations

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.manifests.pod import PodTemplate
from airflow_k8s_ml.manifests.training import (
    KUEUE_QUEUE_LABEL,
    FineTuneJobSpec,
    PyTorchJobSpec,
    build_job,
    build_pytorchjob,
    pytorchjob_max_name_length,
)

KEY = RunKey("nightly_finetune", "train", "manual__2024-01-01T00:00:00+00:00", attempt=2)
POD = PodTemplate(
    image="ghcr.io/acme/train:1", command=["python", "-m", "train"], gpus=1, requests={"cpu": "4"}
)


def roundtrip(obj, model):
    from kubernetes.client import ApiClient

    client = ApiClient()
    return client.sanitize_for_serialization(client._ApiClient__deserialize(obj, model))


def test_build_job_defaults():
    job = build_job(FineTuneJobSpec(pod=POD), KEY.workload_name(), "ml", KEY.labels(), KEY.annotations())
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["metadata"]["name"] == KEY.workload_name()
    assert job["metadata"]["namespace"] == "ml"
    assert job["metadata"]["labels"] == KEY.labels()
    assert job["metadata"]["annotations"] == KEY.annotations()
    spec = job["spec"]
    assert spec["backoffLimit"] == 0
    assert (
        "suspend" not in spec
        and "activeDeadlineSeconds" not in spec
        and "ttlSecondsAfterFinished" not in spec
    )
    template = spec["template"]
    assert template["metadata"]["labels"] == KEY.labels()
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["spec"]["containers"][0]["name"] == "main"


def test_rendered_job_deserializes_into_client_models_without_losing_fields():
    spec = FineTuneJobSpec(
        pod=POD,
        backoff_limit=3,
        restart_policy="Never",
        active_deadline_seconds=3600,
        ttl_seconds_after_finished=600,
        queue_name="gpu-queue",
        pod_failure_policy={
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
        },
        labels={"team": "ml"},
        annotations={"owner": "ml-platform"},
    )
    job = build_job(spec, KEY.workload_name(), "ml", KEY.labels(), KEY.annotations())
    # Unknown or misspelt fields would be dropped by the client's models, so equality proves the field names.
    assert roundtrip(job, "V1Job") == job


def test_job_full_options():
    spec = FineTuneJobSpec(
        pod=POD,
        backoff_limit=2,
        restart_policy="OnFailure",
        active_deadline_seconds=7200,
        ttl_seconds_after_finished=0,
        parallelism=2,
        completions=2,
        labels={"team": "ml"},
    )
    job = build_job(spec, "ft-1", "ml", {"airflow-k8s-ml/dag-id": "d"})
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["ttlSecondsAfterFinished"] == 0
    assert job["spec"]["parallelism"] == 2 and job["spec"]["completions"] == 2
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["metadata"]["labels"] == {"team": "ml", "airflow-k8s-ml/dag-id": "d"}


def test_kueue_queue_name_labels_and_suspends():
    job = build_job(FineTuneJobSpec(pod=POD, queue_name="team-a"), "ft", "ml", KEY.labels())
    assert job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "team-a"
    assert job["spec"]["suspend"] is True
    assert KUEUE_QUEUE_LABEL not in job["spec"]["template"]["metadata"]["labels"]
    suspended = build_job(FineTuneJobSpec(pod=POD, suspend=True), "ft", "ml")
    assert suspended["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"pod": {"image": "x"}}, "pod"),
        ({"queue_name": "team-a", "suspend": False}, "suspend"),
        ({"queue_name": "Team A"}, "queue_name"),
        ({"suspend": "yes"}, "suspend"),
        ({"backoff_limit": -1}, "backoff_limit"),
        ({"backoff_limit": None}, "backoff_limit"),
        ({"restart_policy": "Always"}, "restart_policy"),
        ({"active_deadline_seconds": -5}, "active_deadline_seconds"),
        ({"active_deadline_seconds": 0}, "active_deadline_seconds"),
        ({"ttl_seconds_after_finished": -1}, "ttl_seconds_after_finished"),
        ({"parallelism": 0}, "parallelism"),
        ({"completions": 0}, "completions"),
        ({"pod_failure_policy": {"rules": []}}, "pod_failure_policy.rules"),
        ({"pod_failure_policy": {"rules": [{}]}, "restart_policy": "OnFailure"}, "pod_failure_policy"),
        ({"labels": {"bad key!": "x"}}, "labels[bad key!]"),
    ],
)
def test_fine_tune_spec_errors(kwargs, field):
    with pytest.raises(ValidationError) as info:
        FineTuneJobSpec(**{"pod": POD, **kwargs})
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize(
    ("name", "namespace", "field"),
    [
        ("Bad_Name", "ml", "name"),
        ("j" * 64, "ml", "name"),
        ("ok", "Bad NS", "namespace"),
        ("ok", "n" * 64, "namespace"),
    ],
)
def test_build_job_rejects_bad_names(name, namespace, field):
    with pytest.raises(ValidationError) as info:
        build_job(FineTuneJobSpec(pod=POD), name, namespace)
    assert info.value.field == field


def test_reserved_run_labels_cannot_be_spoofed_by_spec_labels():
    spec = FineTuneJobSpec(pod=POD, labels={"airflow-k8s-ml/run-id": "other"})
    with pytest.raises(ValidationError) as info:
        build_job(spec, "ft", "ml", KEY.labels())
    assert info.value.field == "labels[airflow-k8s-ml/run-id]"


def test_build_pytorchjob():
    worker = PodTemplate(image="ghcr.io/acme/train:1", gpus=1, command=["torchrun", "train.py"])
    spec = PyTorchJobSpec(
        master=POD,
        workers=3,
        worker=worker,
        nproc_per_node=1,
        backoff_limit=2,
        active_deadline_seconds=3600,
        ttl_seconds_after_finished=600,
        clean_pod_policy="Running",
        queue_name="gpu",
        scheduling_queue="research",
        min_available=4,
        priority_class="high",
    )
    name = KEY.workload_name("PyTorchJob")
    job = build_pytorchjob(spec, name, "ml", KEY.labels(), KEY.annotations())
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    assert job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "gpu"
    assert job["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "backoffLimit": 2,
        "activeDeadlineSeconds": 3600,
        "ttlSecondsAfterFinished": 600,
        "suspend": True,
        "schedulingPolicy": {"queue": "research", "minAvailable": 4, "priorityClass": "high"},
    }
    assert job["spec"]["nprocPerNode"] == "1"
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    for role, pod in (("Master", POD), ("Worker", worker)):
        replica = replicas[role]
        assert replica["restartPolicy"] == "OnFailure"
        container = replica["template"]["spec"]["containers"][0]
        assert container["name"] == "pytorch"
        assert container["image"] == pod.image
        assert container["command"] == list(pod.command or [])
        assert replica["template"]["metadata"]["labels"] == KEY.labels()
        assert "restartPolicy" not in replica["template"]["spec"]
        assert roundtrip(replica["template"], "V1PodTemplateSpec") == replica["template"]


def test_pytorchjob_defaults_master_only():
    job = build_pytorchjob(PyTorchJobSpec(master=POD), "pt-single", "ml")
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Master"}
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "None"}
    assert "nprocPerNode" not in job["spec"]


def test_pytorchjob_worker_defaults_to_master_pod():
    job = build_pytorchjob(PyTorchJobSpec(master=POD, workers=2), "pt", "ml")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas["Worker"]["template"] == replicas["Master"]["template"]


def test_pytorchjob_name_rules():
    assert pytorchjob_max_name_length(0) == 54
    assert pytorchjob_max_name_length(100) == 53  # "-worker-99"
    assert pytorchjob_max_name_length(101) == 52  # "-worker-100"
    spec = PyTorchJobSpec(master=POD, workers=101)
    build_pytorchjob(spec, "p" * 52, "ml")
    for bad in ("p" * 53, "1pt", "pt.job", "PT"):
        with pytest.raises(ValidationError) as info:
            build_pytorchjob(spec, bad, "ml")
        assert info.value.field == "name"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"master": None}, "master"),
        ({"workers": -1}, "workers"),
        ({"worker": PodTemplate(image="y")}, "worker"),
        ({"nproc_per_node": "many"}, "nproc_per_node"),
        ({"nproc_per_node": 0}, "nproc_per_node"),
        ({"restart_policy": "Sometimes"}, "restart_policy"),
        ({"backoff_limit": -1}, "backoff_limit"),
        ({"active_deadline_seconds": -1}, "active_deadline_seconds"),
        ({"ttl_seconds_after_finished": -1}, "ttl_seconds_after_finished"),
        ({"clean_pod_policy": "Some"}, "clean_pod_policy"),
        ({"queue_name": "q", "suspend": False}, "suspend"),
        ({"min_available": 5, "workers": 3}, "min_available"),
        ({"scheduling_queue": "Bad Queue"}, "scheduling_queue"),
    ],
)
def test_pytorchjob_spec_errors(kwargs, field):
    with pytest.raises(ValidationError) as info:
        PyTorchJobSpec(**{"master": POD, **kwargs})
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize("value", ["auto", "gpu", "cpu", 2, "4"])
def test_nproc_per_node_values(value):
    job = build_pytorchjob(PyTorchJobSpec(master=POD, nproc_per_node=value), "pt", "ml")
    assert job["spec"]["nprocPerNode"] == str(value)


DISRUPTION_IGNORED = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def test_fine_tune_job_does_not_count_a_disruption_against_its_backoff_limit():
    job = build_job(FineTuneJobSpec(pod=POD), KEY.workload_name(), "ml", KEY.labels(), KEY.annotations())
    assert job["spec"]["podFailurePolicy"] == {"rules": [DISRUPTION_IGNORED]}


def test_a_users_pod_failure_policy_gets_the_disruption_rule_first_unless_it_decides_disruptions():
    fail_on_3 = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}
    spec = FineTuneJobSpec(pod=POD, pod_failure_policy={"rules": [fail_on_3]})
    job = build_job(spec, KEY.workload_name(), "ml")
    assert job["spec"]["podFailurePolicy"] == {"rules": [DISRUPTION_IGNORED, fail_on_3]}
    counted = {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]}
    own = build_job(
        FineTuneJobSpec(pod=POD, pod_failure_policy={"rules": [counted]}), KEY.workload_name(), "ml"
    )
    assert own["spec"]["podFailurePolicy"] == {"rules": [counted]}


def test_on_failure_jobs_carry_no_pod_failure_policy():
    """The API server accepts a pod failure policy only with restartPolicy Never."""
    job = build_job(FineTuneJobSpec(pod=POD, restart_policy="OnFailure"), KEY.workload_name(), "ml")
    assert "podFailurePolicy" not in job["spec"]
