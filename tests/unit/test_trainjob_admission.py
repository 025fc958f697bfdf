"""Admission of TrainJobs, runtimes and JobSets: CRD defaults and rules (422) and upstream's webhook
messages (403), as Kubeflow Trainer and JobSet word them."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.controllers.jobset.admission import admit_jobset
from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.admission import trainjob_admission
from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.runtime_admission import runtime_admission
from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.runtimes import torch_distributed

Obj = dict[str, Any]
RUNTIMES = {("ClusterTrainingRuntime", "", "torch-distributed"): torch_distributed()}


def lookup(kind: str, namespace: str, name: str) -> Obj | None:
    return RUNTIMES.get((kind, "" if kind == "ClusterTrainingRuntime" else namespace, name))


admit = trainjob_admission(lookup, lambda: 1_700_000_000.0)


def trainjob(name: str = "tj", **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def refused(obj: Obj, old: Obj | None = None) -> errors.StatusError:
    with pytest.raises(errors.StatusError) as caught:
        admit(obj, old)
    return caught.value


def test_defaults() -> None:
    spec = admit(trainjob(), None)["spec"]
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert spec["suspend"] is False
    assert spec["managedBy"] == "trainer.kubeflow.org/trainjob-controller"


def test_crd_rules_are_422() -> None:
    bad_name = refused(trainjob("1abc"))
    assert bad_name.code == 422
    assert bad_name.message == (
        'TrainJob.trainer.kubeflow.org "1abc" is invalid: <nil>: Invalid value: "object": '
        "metadata.name must match RFC 1035 DNS label format"
    )
    manager = refused(trainjob(managedBy="someone/else"))
    assert (
        "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"
        in (manager.message)
    )
    nproc = refused(trainjob(trainer={"numProcPerNode": 0}))
    assert (
        'spec.trainer.numProcPerNode: Invalid value: "integer": '
        "numProcPerNode must be greater than or equal to 1" in nproc.message
    )
    deadline = refused(trainjob(activeDeadlineSeconds=0))
    assert "spec.activeDeadlineSeconds in body should be greater than or equal to 1" in deadline.message


def test_trainer_is_immutable() -> None:
    old = admit(trainjob(trainer={"numNodes": 1}), None)
    changed = refused(trainjob(trainer={"numNodes": 2}), old)
    assert changed.code == 422
    assert 'spec.trainer: Invalid value: "object": field is immutable' in changed.message
    assert admit(trainjob(trainer={"numNodes": 1}, suspend=True), old)["spec"]["suspend"] is True


def test_webhook_requires_the_runtime() -> None:
    missing = refused(trainjob(runtimeRef={"name": "nope"}))
    assert missing.code == 403
    assert missing.message == (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.RuntimeRef: '
        'Invalid value: {"name":"nope","apiGroup":"trainer.kubeflow.org","kind":"ClusterTrainingRuntime"}: '
        'clustertrainingruntimes.trainer.kubeflow.org "nope" not found: specified clusterTrainingRuntime '
        "must be created before the TrainJob is created"
    )
    namespaced = refused(trainjob(runtimeRef={"name": "mine", "kind": "TrainingRuntime"}))
    assert "spec.runtimeRef: Invalid value" in namespaced.message
    assert "specified trainingRuntime must be created before the TrainJob is created" in namespaced.message


def test_webhook_refuses_unsupported_runtime_kinds() -> None:
    unsupported = refused(trainjob(runtimeRef={"name": "x", "kind": "Other", "apiGroup": "example.com"}))
    assert unsupported.message.endswith("denied the request: unsupported runtime: Other.example.com")


def test_torch_plugin_reserves_pet_variables() -> None:
    env = [
        {"name": "PET_NNODES", "value": "3"},
        {"name": "OK", "value": "1"},
        {"name": "PET_MASTER_ADDR", "value": "x"},
    ]
    denied = refused(trainjob(trainer={"env": env}))
    assert denied.message.endswith(
        "must not have reserved envs, invalid envs configured: [PET_MASTER_ADDR PET_NNODES]"
    )


def test_initializer_needs_its_job_in_the_runtime() -> None:
    denied = refused(trainjob(initializer={"dataset": {"storageUri": "hf://x"}}))
    assert (
        "must have dataset-initializer job when trainJob is configured with input datasetConfig"
        in denied.message
    )


def test_runtime_webhook_checks_ancestor_jobs() -> None:
    runtime = torch_distributed()
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["replicas"] = 2
    node["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    with pytest.raises(errors.StatusError) as caught:
        runtime_admission("ClusterTrainingRuntime")(runtime, None)
    message = caught.value.message
    assert message.startswith(
        'admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied the request: ['
    )
    assert "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1" in message
    assert "must contain the required container for the ancestor: trainer" in message


def jobset(name: str, **spec: Any) -> Obj:
    rjob = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": []}}}}}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"replicatedJobs": [rjob], **spec}}


def test_jobset_webhook_messages() -> None:
    with pytest.raises(errors.StatusError) as long_name:
        admit_jobset(jobset("x" * 60), None)
    assert long_name.value.code == 403
    assert long_name.value.message == (
        'admission webhook "vjobset.kb.io" denied the request: spec.replicatedJobs[0].name: Invalid value: '
        f'"{"x" * 60}-node-0": JobSet name is too long, job names generated for this JobSet will exceed 63 '
        "characters"
    )
    with pytest.raises(errors.StatusError) as targets:
        admit_jobset(
            jobset("ok", successPolicy={"operator": "All", "targetReplicatedJobs": ["driver"]}), None
        )
    assert targets.value.message.endswith(
        "invalid replicatedJob name 'driver' does not appear in .spec.ReplicatedJobs"
    )
    rules = [{"name": "1bad", "action": "FailJobSet"}]
    with pytest.raises(errors.StatusError) as rule:
        admit_jobset(jobset("ok", failurePolicy={"rules": rules}), None)
    assert "invalid failure policy rule name '1bad'" in rule.value.message


def test_jobset_replicated_jobs_are_immutable() -> None:
    old = admit_jobset(jobset("ok"), None)
    new = jobset("ok")
    new["spec"]["replicatedJobs"][0]["replicas"] = 3
    with pytest.raises(errors.StatusError) as caught:
        admit_jobset(new, old)
    assert 'spec.replicatedJobs: Invalid value: "array": field is immutable' in caught.value.message
    suspended = jobset("ok", suspend=True)
    assert admit_jobset(suspended, old)["spec"]["suspend"] is True


def test_field_types_are_checked_before_the_webhooks() -> None:
    wrong = refused(trainjob(trainer={"numNodes": "two", "command": "python train.py"}, suspend="yes"))
    assert wrong.code == 422
    assert (
        'spec.suspend: Invalid value: "string": spec.suspend in body must be of type boolean: "string"'
        in (wrong.message)
    )
    assert "spec.trainer.numNodes in body must be of type integer" in wrong.message
    assert "spec.trainer.command in body must be of type array" in wrong.message
    with pytest.raises(errors.StatusError) as js:
        bad = jobset("ok")
        bad["spec"]["replicatedJobs"][0]["replicas"] = "2"
        admit_jobset(bad, None)
    assert js.value.code == 422
    assert js.value.message == (
        'JobSet.jobset.x-k8s.io "ok" is invalid: spec.replicatedJobs[0].replicas: Invalid value: "string": '
        'spec.replicatedJobs[0].replicas in body must be of type integer: "string"'
    )
    runtime = torch_distributed()
    runtime["spec"]["mlPolicy"]["numNodes"] = "1"
    with pytest.raises(errors.StatusError) as rt:
        runtime_admission("ClusterTrainingRuntime")(runtime, None)
    assert rt.value.code == 422
    assert "spec.mlPolicy.numNodes in body must be of type integer" in rt.value.message


def patch_for(job: str, container: Obj, manager: str = "example.com/airflow") -> Obj:
    pod = {"containers": [container]}
    rjob = {"name": job, "template": {"spec": {"template": {"spec": pod}}}}
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [rjob]}}}}


def test_runtime_patches_are_stamped_and_checked() -> None:
    ok = admit(trainjob(runtimePatches=[patch_for("node", {"name": "node", "volumeMounts": []})]), None)
    assert ok["spec"]["runtimePatches"][0]["time"] == "2023-11-14T22:13:20Z"
    env = {"name": "node", "env": [{"name": "A", "value": "1"}]}
    denied = refused(trainjob(runtimePatches=[patch_for("node", env)]))
    assert (
        "must not have envs for the dataset-initializer, model-initializer, node containers" in denied.message
    )
    unknown = refused(trainjob(runtimePatches=[patch_for("launcher", {"name": "x"})]))
    assert "must not have replicated job that doesn't exist in the runtime job template" in unknown.message
    manager = refused(trainjob(runtimePatches=[patch_for("node", {"name": "node"}, manager="airflow")]))
    assert (
        'spec.runtimePatches.manager: Invalid value: "airflow": must be a domain-prefixed path'
        in manager.message
    )


def test_runtime_patches_change_only_while_suspended() -> None:
    old = admit(trainjob(runtimePatches=[patch_for("node", {"name": "node"})]), None)
    changed = [patch_for("node", {"name": "node", "volumeMounts": [{"name": "v", "mountPath": "/v"}]})]
    denied = refused(trainjob(runtimePatches=changed), old)
    assert (
        "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
        in (denied.message)
    )
    assert admit(trainjob(runtimePatches=changed, suspend=True), old)["spec"]["suspend"] is True


def test_runtime_patches_wait_for_active_jobs_to_stop() -> None:
    jobset = {"status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}}
    with_jobset = trainjob_admission(lookup, lambda: 1_700_000_000.0, lambda _ns, _name: jobset)
    old = with_jobset(trainjob(runtimePatches=[patch_for("node", {"name": "node"})]), None)
    changed = [patch_for("node", {"name": "node", "volumeMounts": [{"name": "v", "mountPath": "/v"}]})]
    with pytest.raises(errors.StatusError) as caught:
        with_jobset(trainjob(runtimePatches=changed, suspend=True), old)
    assert caught.value.message.endswith(
        "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's "
        "ReplicatedJob node is still active"
    )
