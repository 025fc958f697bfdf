"""TFJob, pure: the operator's render (validated against Kubeflow's own v1 models), its parse-time checks,
the local controller's TF_CONFIG (training-operator 1.9's ``genTFConfigJSONStr``) and UpdateJobStatus, and
the reference workload's reading of TF_CONFIG."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators import TFJobOperator
from airflow_k8s_ml.testbed.local_cluster.controllers.tfjob.admission import set_defaults, webhook_errors
from airflow_k8s_ml.testbed.local_cluster.controllers.tfjob.pods import tf_config
from airflow_k8s_ml.testbed.local_cluster.controllers.tfjob.status import update_job_status
from airflow_k8s_ml.workloads.tf_topology import TopologyError, coordinator, parse_tf_config
from tests.unit.test_operator_render import render


def tfjob_op(**kwargs: Any) -> TFJobOperator:
    return TFJobOperator(task_id="tf", image="trainer:1", command=["python", "train.py"], **kwargs)


def _model(data: Any, klass: str) -> Any:
    """``data`` read into ``klass``: Kubeflow's v1 models (``kubeflow.training.models``), the core types they
    hold by the ``kubernetes`` client's own deserializer. A key the model does not declare fails."""
    from kubeflow.training import models
    from kubernetes.client import ApiClient

    if data is None:
        return None
    if klass.startswith("list["):
        return [_model(item, klass[5:-1]) for item in data]
    if klass.startswith(("dict(", "dict[")):
        value_type = klass[5:-1].split(",", 1)[1].strip()
        return {key: _model(value, value_type) for key, value in data.items()}
    cls = getattr(models, klass, None) if klass.startswith("KubeflowOrg") else None
    if cls is None:

        class Reply:
            def __init__(self, body: Any) -> None:
                self.data = json.dumps(body)

        return ApiClient().deserialize(Reply(data), klass)
    unknown = set(data) - set(cls.attribute_map.values())
    assert not unknown, f"{klass} has no {sorted(unknown)}"
    kwargs = {
        attr: _model(data[cls.attribute_map[attr]], type_)
        for attr, type_ in cls.openapi_types.items()
        if cls.attribute_map[attr] in data
    }
    return cls(**kwargs)


def kubeflow_roundtrip(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` read into ``kubeflow.training.models.KubeflowOrgV1TFJob`` and written back: a field the
    models do not know, or a value of the wrong type, does not survive."""
    from kubeflow.training import models
    from kubernetes.client import ApiClient

    model = _model(obj, "KubeflowOrgV1TFJob")
    assert isinstance(model, models.KubeflowOrgV1TFJob)
    return ApiClient().sanitize_for_serialization(model)  # type: ignore[no-any-return]


def test_render_is_a_tfjob_kubeflows_models_accept_whole() -> None:
    job = render(tfjob_op(workers=3, ps=2, evaluator=True, backoff_limit=1, active_deadline_seconds=600))
    assert kubeflow_roundtrip(job) == job
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "TFJob"
    specs = job["spec"]["tfReplicaSpecs"]
    assert {t: s["replicas"] for t, s in specs.items()} == {"Chief": 1, "Evaluator": 1, "PS": 2, "Worker": 3}
    assert {s["restartPolicy"] for s in specs.values()} == {"Never"}
    assert all(s["template"]["spec"]["containers"][0]["name"] == "tensorflow" for s in specs.values())
    assert job["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "backoffLimit": 1,
        "activeDeadlineSeconds": 600,
    }
    assert job["spec"]["successPolicy"] == ""
    pod_labels = specs["Worker"]["template"]["metadata"]["labels"]
    assert pod_labels["airflow-k8s-ml/task-id"] == "finetune"  # the run identity on every replica


def test_without_a_chief_all_workers_and_a_queue() -> None:
    job = render(tfjob_op(chief=False, workers=2, success_policy="AllWorkers", queue_name="gpu"))
    assert kubeflow_roundtrip(job) == job
    assert list(job["spec"]["tfReplicaSpecs"]) == ["Worker"]
    assert job["spec"]["successPolicy"] == "AllWorkers" and job["spec"]["runPolicy"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"success_policy": "AllWorkers"}, "success_policy"),  # needs chief=False
        ({"chief": False, "workers": 0}, "workers"),
        ({"ps": 1, "workers": 0}, "ps"),
        ({"restart_policy": "Sometimes"}, "restart_policy"),
        ({"clean_pod_policy": "Some"}, "clean_pod_policy"),
        ({"ps": -1}, "ps"),
    ],
)
def test_bad_arguments_fail_at_parse_time_naming_the_argument(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        tfjob_op(**kwargs)
    assert info.value.field == field


def test_gang_scheduler_is_refused_with_why() -> None:
    with pytest.raises(TypeError, match="gang_scheduler"):
        tfjob_op(gang_scheduler="volcano")


def _job(specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "tf:2"}]}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "ml"},
        "spec": {
            "tfReplicaSpecs": {t: {"replicas": n, "template": template} for t, n in specs.items()},
            **spec,
        },
    }
    set_defaults(job)
    return job


def test_tf_config_is_go_json_of_the_cluster_and_task() -> None:
    job = _job({"Worker": 2, "PS": 1})
    config = tf_config(job, "Worker", 1, {})
    assert config == (
        '{"cluster":{"ps":["mnist-ps-0.ml.svc:2222"],'
        '"worker":["mnist-worker-0.ml.svc:2222","mnist-worker-1.ml.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )
    placed = json.loads(tf_config(job, "PS", 0, {("Worker", 0): "127.42.0.9"}))
    assert placed["cluster"]["worker"][0] == "127.42.0.9:2222" and placed["task"] == {
        "type": "ps",
        "index": 0,
    }


def test_tf_config_sparse_with_dynamic_workers() -> None:
    job = _job({"Worker": 2, "PS": 2}, enableDynamicWorker=True)
    assert json.loads(tf_config(job, "Worker", 1, {})) == {
        "cluster": {
            "worker": {"1": "mnist-worker-1.ml.svc:2222"},
            "ps": ["mnist-ps-0.ml.svc:2222", "mnist-ps-1.ml.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
    }
    assert json.loads(tf_config(job, "PS", 1, {}))["cluster"] == {
        "worker": {},
        "ps": ["mnist-ps-1.ml.svc:2222"],
    }


def test_webhook_refuses_two_coordinators_and_the_wrong_container_name() -> None:
    job = _job({"Chief": 1, "Master": 1})
    assert (
        "spec.tfReplicaSpecs",
        "FieldValueForbidden",
        "Forbidden: must not have more than 1 Chief or Master role",
    ) in webhook_errors(job)


def _worker_pod(index: int, phase: str, code: int | None) -> dict[str, Any]:
    state = {"terminated": {"exitCode": code}} if code is not None else {"running": {}}
    return {
        "metadata": {
            "name": f"mnist-worker-{index}",
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": str(index),
            },
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "tensorflow", "state": state}]},
    }


@pytest.mark.parametrize(("policy", "succeeded"), [("", True), ("AllWorkers", False)])
def test_success_policy_worker_0_or_all_workers(policy: str, succeeded: bool) -> None:
    job = _job({"Worker": 2}, successPolicy=policy)
    pods = [_worker_pod(0, "Succeeded", 0), _worker_pod(1, "Running", None)]
    status: dict[str, Any] = {"replicaStatuses": {"Worker": {"active": 1, "succeeded": 1}}}
    events: list[tuple[str, str, str]] = []
    update_job_status(job, status, 0.0, lambda *e: events.append(e), pods)
    types = [c["type"] for c in status.get("conditions", []) if c["status"] == "True"]
    assert ("Succeeded" in types) is succeeded
    if succeeded:
        assert events == [("Normal", "TFJobSucceeded", "TFJob ml/mnist successfully completed.")]
    else:
        assert types == ["Running"]


def test_failed_replica_without_a_restart_fails_the_job() -> None:
    job = _job({"Chief": 1, "Worker": 2})
    status: dict[str, Any] = {
        "replicaStatuses": {"Chief": {"active": 1}, "Worker": {"active": 1, "failed": 1}}
    }
    update_job_status(job, status, 0.0, lambda *e: None, [])
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "TFJobFailed"
    assert failed["message"] == "TFJob ml/mnist has failed because 1 Worker replica(s) failed."


def test_the_reference_workload_reads_and_checks_tf_config() -> None:
    raw = json.dumps(
        {
            "cluster": {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222"]},
            "task": {"type": "worker", "index": 0},
        }
    )
    topology = parse_tf_config(raw)
    assert topology["type"] == "worker" and coordinator(topology["cluster"]) == ("chief", 0)
    assert coordinator({"worker": ["a:1", "b:1"]}) == ("worker", 0)
    for bad in (None, "{", '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":1}}'):
        with pytest.raises(TopologyError):
            parse_tf_config(bad)
