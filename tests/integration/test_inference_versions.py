"""Model versions against the local cluster: each revision records its model (URI, the gate's step and
metrics, the Airflow run), the history is in the XCom, ``rollback_to`` deploys a recorded revision again
(Kubernetes takes its ReplicaSet back), and a revision that is not recorded fails before anything changes."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from tests.integration.serving_helpers import context, run_task
from tests.integration.test_inference_operator_objects import make

A = "s3://models/digits/step-4/"
B = "s3://models/digits/step-9/"
PLAIN = {"autoscaling": None, "replicas": 1, "pdb_min_available": None, "network_policy": None}


def deploy(namespace: str, run_id: str, model: Any, serves: str, **more: Any) -> dict[str, Any]:
    op = make(namespace, **PLAIN, model_uri=model, expected_response={"model_uri": serves}, **more)
    return run_task(op, context("deploy", run_id=run_id))


def shown(result: dict[str, Any]) -> list[tuple[int, str, bool]]:
    return [(e["revision"], e["model_uri"], e["serving"]) for e in result["model_history"]]


@pytest.mark.usefixtures("kube_conn")
def test_revisions_record_their_model_and_rollback_to_previous_serves_the_last_one_again(
    namespace: str, api_client: Any
) -> None:
    from kubernetes import client

    gate = {"uri": A, "step": 4, "metrics": {"accuracy": 0.91}}
    first = deploy(namespace, "r1", gate, A)
    run = {"dag_id": "nightly", "task_id": "deploy", "run_id": "r1"}
    assert first["model"] == {"model_uri": A, "step": 4, "metrics": {"accuracy": 0.91}, **run}
    assert shown(first) == [(1, A, True)]

    second = deploy(namespace, "r2", B, B)
    assert second["revision"] == 2 and second["model"]["run_id"] == "r2"
    assert shown(second) == [(2, B, True), (1, A, False)]

    apps = client.AppsV1Api(api_client)
    version = apps.read_namespaced_deployment("echo", namespace).metadata.resource_version
    with pytest.raises(ValidationError) as refused:
        make(namespace, **PLAIN, model_uri=B, rollback_to=7).execute(context("deploy", run_id="r3"))
    assert refused.value.field == "rollback_to"
    assert refused.value.message == "no revision 7 is recorded (recorded: 2, 1)"
    assert apps.read_namespaced_deployment("echo", namespace).metadata.resource_version == version

    back = deploy(namespace, "r3", B, A, rollback_to="previous")
    assert back["revision"] == 3 and back["model_uri"] == A
    assert back["model"] == first["model"]  # the record of the run that first deployed it, as it was
    assert back["changes"]["Deployment"] == "configured"
    assert shown(back) == [(3, A, True), (2, B, False)]  # revision 1's ReplicaSet taken back as 3


@pytest.mark.parametrize("value", [0, -1, "latest", 1.5, True])
def test_a_bad_rollback_to_fails_at_dag_parse_time(value: Any) -> None:
    with pytest.raises(ValidationError) as info:
        make("ns", rollback_to=value)
    assert info.value.field == "rollback_to"
