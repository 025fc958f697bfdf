"""InferenceDeploymentOperator without a cluster: parse-time validation, rendering, serialization, imports."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.operators._serving import InferenceArgs, inference_spec, render_inference
from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator

BASE: dict[str, Any] = {
    "task_id": "deploy",
    "name": "digits",
    "model_uri": "file:///m/step-1/",
    "image": "py:3",
}
KEY = RunKey("nightly", "deploy", "scheduled__2024-06-01T00:00:00+00:00", attempt=3)


def _operator(**overrides: Any) -> InferenceDeploymentOperator:
    return InferenceDeploymentOperator(**{**BASE, **overrides})


def _args(arguments: dict[str, Any]) -> InferenceArgs:
    """The typed arguments an operator built from ``arguments`` reads (what ``execute`` renders from)."""
    return _operator(**arguments)._arguments()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "Digits_Model"}, "name"),
        ({"namespace": "Bad NS"}, "namespace"),
        ({"model_uri": {"step": 3}}, "model_uri"),
        (
            {"replicas": 2, "autoscaling": {"max_replicas": 3, "metric_name": "rps", "metric_target": 5}},
            "replicas",
        ),
        ({"autoscaling": {"max_replicas": 3, "cpu": 70}}, "autoscaling.cpu"),
        ({"autoscaling": {"max_replicas": 3, "target_cpu_utilization": 70}}, "requests"),
        ({"pod_options": {"tolerations": [], "colour": "red"}}, "pod_options.colour"),
        (
            {"deployment_options": {"max_surge": 0, "max_unavailable": 0}},
            "deployment_options.max_unavailable",
        ),
        ({"network_policy": {}}, "network_policy"),
        ({"pdb_min_available": 1}, "pdb_min_available"),
        ({"env": {"MODEL_URI": "x"}}, "env[MODEL_URI]"),
        ({"smoke_request": {"instances": []}}, "smoke_path"),
        ({"rollout_timeout": -5}, "rollout_timeout"),
        (
            {"deployment_overrides": {"spec": {"selector": {"matchLabels": {"a": "b"}}}}},
            "deployment_overrides.spec.selector",
        ),
    ],
)
def test_bad_arguments_fail_at_dag_parse_time_naming_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        _operator(**overrides)
    assert info.value.field == field


def test_templated_and_xcom_arguments_are_checked_later() -> None:
    with DAG("d", schedule=None):
        gate = _operator(task_id="gate")
        op = _operator(model_uri=gate.output, name="{{ params.name }}", namespace="{{ params.ns }}")
    assert op.model_uri is not None


def test_rendered_objects_carry_model_and_run_but_not_the_attempt() -> None:
    values = {**BASE, "model_uri": {"uri": "file:///m/step-7/", "step": 7}, "replicas": 2}
    values.update({"port": 8080, "readiness_path": "/readyz", "liveness_path": "/healthz"})
    values.update({"pdb_min_available": 1, "network_policy": {"from_namespaces": ["airflow"]}})
    objects = render_inference(inference_spec(_args(values)), "digits", "ml", KEY)
    assert [o["kind"] for o in objects] == [
        "NetworkPolicy",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    ]
    deployment = objects[1]
    labels = deployment["metadata"]["labels"]
    annotations = deployment["metadata"]["annotations"]
    assert labels["airflow-k8s-ml/dag-id"] == "nightly" and "airflow-k8s-ml/attempt" not in labels
    assert annotations["airflow-k8s-ml/run-id"] == KEY.run_id and "airflow-k8s-ml/attempt" not in annotations
    assert annotations["airflow-k8s-ml/model-uri"] == "file:///m/step-7/"
    template = deployment["spec"]["template"]
    # The run is not in the pod template (a new run with the same model must not roll the pods).
    assert not any(key.startswith("airflow-k8s-ml/run") for key in template["metadata"]["labels"])
    env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
    assert env["MODEL_URI"] == "file:///m/step-7/" and env["PORT"] == "8080"


def test_deployment_overrides_are_a_merge_patch_on_the_deployment_only() -> None:
    values = {**BASE, "readiness_path": "/readyz"}
    overrides = {
        "spec": {"template": {"spec": {"terminationGracePeriodSeconds": 5}}, "minReadySeconds": None}
    }
    objects = render_inference(inference_spec(_args(values)), "digits", "ml", KEY, overrides)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 5
    assert "minReadySeconds" not in deployment["spec"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["name"] == "server"


def test_every_template_field_survives_dag_serialization() -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    with DAG("serial", schedule=None) as dag:
        _operator(
            model_uri="{{ ti.xcom_pull('gate')['uri'] }}",
            env={"LOG_LEVEL": "info"},
            smoke_path="/predict",
            smoke_request={"instances": [[0] * 64]},
            expected_response={"$.predictions": [0]},
            autoscaling={"max_replicas": 3, "target_cpu_utilization": 70},
            requests={"cpu": "100m"},
        )
    task = DagSerialization.from_dict(DagSerialization.to_dict(dag)).get_task("deploy")
    original = dag.get_task("deploy")
    for name in InferenceDeploymentOperator.template_fields:
        value = getattr(original, name)  # a timedelta budget is stored as its text, as for every operator
        assert getattr(task, name) == (str(value) if isinstance(value, timedelta) else value), name


def test_importing_and_building_the_operators_stays_light() -> None:
    script = """
import sys
from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
from airflow_k8s_ml.operators.batch_inference import BatchInferenceCronJobOperator
InferenceDeploymentOperator(task_id="d", name="m", model_uri="file:///m/", image="i")
BatchInferenceCronJobOperator(task_id="b", name="b", schedule="@daily", model_uri="file:///m/",
                              input_uri="file:///i/", output_uri="file:///o/", image="i")
heavy = ("kubernetes", "kubernetes_asyncio", "aiohttp", "boto3", "botocore", "torch")
print(",".join(sorted(m for m in heavy if m in sys.modules)))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == ""


def test_pod_ip_comes_from_the_downward_api_unless_the_user_sets_it() -> None:
    env = inference_spec(_args(BASE)).pod.field_env
    assert env == {"POD_IP": "status.podIP"}
    mine = inference_spec(_args({**BASE, "env": {"POD_IP": "0.0.0.0"}})).pod
    assert "POD_IP" not in mine.field_env and mine.env["POD_IP"] == "0.0.0.0"


def test_pod_trouble_sees_a_crash_loop_between_back_offs() -> None:
    from airflow_k8s_ml.operators._rollout_report import pod_trouble

    restarting = {
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "server",
                    "state": {"running": {"startedAt": "2024-06-01T00:00:05Z"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                    "restartCount": 2,
                }
            ],
        }
    }
    assert pod_trouble(restarting) == "container server restarted 2 time(s), last exit code 1 (Error)"
    healthy = {"status": {"phase": "Running", "containerStatuses": [{"name": "server", "restartCount": 0}]}}
    assert pod_trouble(healthy) is None


def test_service_proxy_path() -> None:
    from airflow_k8s_ml.kube.serving_ops import service_proxy_path

    assert service_proxy_path("ml", "digits", "http", "/predict") == (
        "/api/v1/namespaces/ml/services/digits:http/proxy/predict"
    )
    assert service_proxy_path("ml", "digits", 80, "readyz").endswith("/services/digits:80/proxy/readyz")


def test_env_from_loads_secrets_and_errors_name_the_argument() -> None:
    values = {**BASE, "env_from": ["s3-credentials"]}
    objects = render_inference(inference_spec(_args(values)), "digits", "ml", KEY)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    with pytest.raises(ValidationError) as info:
        _operator(env_from=["Not_A_Secret"])
    assert info.value.field == "env_from[0]"


def test_env_from_secrets_is_the_deprecated_name_of_env_from() -> None:
    from airflow.exceptions import AirflowProviderDeprecationWarning

    with pytest.warns(
        AirflowProviderDeprecationWarning, match="env_from_secrets is deprecated; pass env_from"
    ):
        op = _operator(env_from_secrets=["s3-credentials"])
    assert op.env_from == ["s3-credentials"]
    with pytest.raises(ValidationError) as info:
        _operator(env_from=["a"], env_from_secrets=["b"])
    assert info.value.field == "env_from_secrets"


def test_defer_after_is_seconds_zero_allowed_and_never_longer_than_the_rollout_budget() -> None:
    from datetime import timedelta

    assert _operator().defer_after == 30.0
    assert _operator(defer_after=0).defer_after == 0.0
    assert _operator(defer_after=timedelta(seconds=5)).defer_after == 5.0
    assert _operator(defer_after=30, rollout_timeout=4)._worker_wait() == 4.0
    with pytest.raises(ValidationError, match="defer_after"):
        _operator(defer_after=-1)
