from __future__ import annotations

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.manifests.pod import PodTemplate
from airflow_k8s_ml.manifests.serving import (
    MODEL_URI_LABEL,
    SELECTOR_LABEL,
    Autoscaling,
    InferenceSpec,
    IngressPolicy,
    build_deployment,
    build_hpa,
    build_inference_objects,
    build_network_policy,
    build_pdb,
    build_service,
    strip_replicas,
)

POD = PodTemplate(image="ghcr.io/acme/serve:1", command=["python", "-m", "serve"], requests={"cpu": "1"})
URI = "s3://models/llama/step-1000"
KEY = RunKey("deploy_dag", "deploy", "manual__2024-01-01T00:00:00+00:00")


def roundtrip(obj, model):
    from kubernetes.client import ApiClient

    client = ApiClient()
    return client.sanitize_for_serialization(client._ApiClient__deserialize(obj, model))


def full_spec(**overrides):
    kwargs = {
        "pod": POD,
        "model_uri": URI,
        "port": 8000,
        "readiness_path": "/ready",
        "liveness_path": "/live",
        "startup_timeout_seconds": 300,
        "autoscaling": Autoscaling(
            min_replicas=2,
            max_replicas=6,
            target_cpu_utilization=70,
            metric_name="requests_per_second",
            metric_target="20",
        ),
        "pdb_min_available": 1,
        "network_policy": IngressPolicy(
            from_namespaces=["gateway"], from_pod_labels={"app": "client"}, from_cidrs=["10.0.0.0/8"]
        ),
    }
    kwargs.update(overrides)
    return InferenceSpec(**kwargs)


def test_deployment():
    dep = build_deployment(full_spec(), "llama", "serving", KEY.task_instance_labels(), KEY.annotations())
    assert dep["apiVersion"] == "apps/v1" and dep["kind"] == "Deployment"
    meta = dep["metadata"]
    assert meta["labels"][SELECTOR_LABEL] == "llama"
    assert meta["labels"]["airflow-k8s-ml/run-id"] == KEY.labels()["airflow-k8s-ml/run-id"]
    assert meta["annotations"][MODEL_URI_LABEL] == URI
    spec = dep["spec"]
    assert spec["replicas"] == 2  # the HPA's min
    assert spec["selector"] == {"matchLabels": {SELECTOR_LABEL: "llama"}}
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert spec["progressDeadlineSeconds"] == 600
    template = spec["template"]
    # run identity stays out of the pod template: a new DAG run with the same model must not roll pods
    assert not any(k.startswith("airflow-k8s-ml/run") for k in template["metadata"]["labels"])
    assert template["metadata"]["labels"][SELECTOR_LABEL] == "llama"
    assert template["metadata"]["annotations"] == {MODEL_URI_LABEL: URI}
    container = template["spec"]["containers"][0]
    assert container["name"] == "server"
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert container["env"][:2] == [{"name": "MODEL_URI", "value": URI}, {"name": "PORT", "value": "8000"}]
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/ready", "port": "http"},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/live"
    # Startup on the readiness path every second: Ready within a second of the model being loaded.
    assert container["startupProbe"] == {
        "httpGet": {"path": "/ready", "port": "http"},
        "periodSeconds": 1,
        "failureThreshold": 300,
    }
    assert template["spec"]["securityContext"]["runAsNonRoot"] is True
    assert roundtrip(dep, "V1Deployment") == dep


def test_same_inputs_render_identically_and_new_model_changes_template():
    a = build_deployment(full_spec(), "llama", "serving", KEY.task_instance_labels())
    b = build_deployment(
        full_spec(), "llama", "serving", RunKey("deploy_dag", "deploy", "run2").task_instance_labels()
    )
    assert a["spec"] == b["spec"]
    c = build_deployment(full_spec(model_uri="s3://models/llama/step-2000"), "llama", "serving")
    assert c["spec"]["template"] != a["spec"]["template"]
    assert c["spec"]["selector"] == a["spec"]["selector"]


def test_service():
    svc = build_service(full_spec(), "llama", "serving")
    assert svc["spec"] == {
        "type": "ClusterIP",
        "selector": {SELECTOR_LABEL: "llama"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
    }
    assert roundtrip(svc, "V1Service") == svc


def test_hpa_cpu_and_custom_metric():
    hpa = build_hpa(full_spec(), "llama", "serving")
    assert hpa is not None
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 6
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "requests_per_second"},
                "target": {"type": "AverageValue", "averageValue": "20"},
            },
        },
    ]
    assert roundtrip(hpa, "V2HorizontalPodAutoscaler") == hpa


def test_hpa_external_metric_with_selector_and_behavior():
    scaling = Autoscaling(
        max_replicas=10,
        metric_name="queue_depth",
        metric_type="External",
        metric_target="100",
        metric_selector={"queue": "inference"},
        scale_down_stabilization_seconds=120,
    )
    hpa = build_hpa(InferenceSpec(pod=POD, model_uri=URI, autoscaling=scaling), "llama", "serving")
    assert hpa is not None
    assert hpa["spec"]["metrics"] == [
        {
            "type": "External",
            "external": {
                "metric": {"name": "queue_depth", "selector": {"matchLabels": {"queue": "inference"}}},
                "target": {"type": "AverageValue", "averageValue": "100"},
            },
        }
    ]
    assert hpa["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 120}}
    assert roundtrip(hpa, "V2HorizontalPodAutoscaler") == hpa


def test_pdb():
    pdb = build_pdb(full_spec(), "llama", "serving")
    assert pdb is not None
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {SELECTOR_LABEL: "llama"}}}
    assert roundtrip(pdb, "V1PodDisruptionBudget") == pdb
    pct = build_pdb(InferenceSpec(pod=POD, model_uri=URI, replicas=4, pdb_min_available="50%"), "x", "ns")
    assert pct is not None and pct["spec"]["minAvailable"] == "50%"


def test_network_policy_content():
    policy = build_network_policy(full_spec(), "llama", "serving")
    assert policy is not None
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {SELECTOR_LABEL: "llama"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}},
                    {"podSelector": {"matchLabels": {"app": "client"}}},
                    {"ipBlock": {"cidr": "10.0.0.0/8"}},
                ],
                "ports": [{"protocol": "TCP", "port": 8000}],
            }
        ],
    }
    assert roundtrip(policy, "V1NetworkPolicy") == policy


def test_optional_objects_absent_by_default():
    spec = InferenceSpec(pod=POD, model_uri=URI)
    objects = build_inference_objects(spec, "llama", "serving")
    assert [o["kind"] for o in objects] == ["Deployment", "Service"]
    assert objects[0]["spec"]["replicas"] == 1
    assert "livenessProbe" not in objects[0]["spec"]["template"]["spec"]["containers"][0]
    full = build_inference_objects(full_spec(), "llama", "serving")
    assert [o["kind"] for o in full] == [
        "NetworkPolicy",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    ]


def test_strip_replicas():
    dep = build_deployment(full_spec(), "llama", "serving")
    stripped = strip_replicas(dep)
    assert "replicas" not in stripped["spec"] and dep["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"model_uri": ""}, "model_uri"),
        ({"pod": None}, "pod"),
        ({"replicas": -1}, "replicas"),
        ({"replicas": 3, "autoscaling": Autoscaling(max_replicas=3, target_cpu_utilization=50)}, "replicas"),
        ({"port": 0}, "port"),
        ({"port": 70000}, "port"),
        ({"service_port": "http"}, "service_port"),
        ({"readiness_path": "healthz"}, "readiness_path"),
        ({"liveness_path": "live"}, "liveness_path"),
        ({"startup_timeout_seconds": 0}, "startup_timeout_seconds"),
        ({"max_surge": 0, "max_unavailable": 0}, "max_unavailable"),
        ({"max_surge": "0%", "max_unavailable": "0%"}, "max_unavailable"),
        ({"max_surge": "150%"}, "max_surge"),
        ({"max_unavailable": -1}, "max_unavailable"),
        ({"progress_deadline_seconds": 10, "min_ready_seconds": 10}, "progress_deadline_seconds"),
        ({"pdb_min_available": 1}, "pdb_min_available"),
        ({"replicas": 3, "pdb_min_available": "100%"}, "pdb_min_available"),
        ({"replicas": 3, "pdb_min_available": "most"}, "pdb_min_available"),
        ({"network_policy": {"from_namespaces": ["a"]}}, "network_policy"),
        ({"autoscaling": {"max_replicas": 3}}, "autoscaling"),
        (
            {
                "pod": PodTemplate(image="x"),
                "autoscaling": Autoscaling(max_replicas=3, target_cpu_utilization=50),
            },
            "requests",
        ),
    ],
)
def test_inference_spec_errors(kwargs, field):
    with pytest.raises(ValidationError) as info:
        InferenceSpec(**{"pod": POD, "model_uri": URI, **kwargs})
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_replicas": 0}, "autoscaling.max_replicas"),
        ({"min_replicas": 5, "max_replicas": 3, "target_cpu_utilization": 50}, "autoscaling.max_replicas"),
        ({"max_replicas": 3}, "autoscaling"),
        ({"max_replicas": 3, "target_cpu_utilization": 0}, "autoscaling.target_cpu_utilization"),
        ({"max_replicas": 3, "metric_name": "rps"}, "autoscaling.metric_target"),
        ({"max_replicas": 3, "metric_name": "rps", "metric_target": "0"}, "autoscaling.metric_target"),
        ({"max_replicas": 3, "metric_name": "rps", "metric_target": "lots"}, "autoscaling.metric_target"),
        (
            {"max_replicas": 3, "target_cpu_utilization": 50, "metric_target": "5"},
            "autoscaling.metric_target",
        ),
        (
            {"max_replicas": 3, "metric_name": "rps", "metric_target": 5, "metric_type": "Object"},
            "autoscaling.metric_type",
        ),
    ],
)
def test_autoscaling_errors(kwargs, field):
    with pytest.raises(ValidationError) as info:
        Autoscaling(**kwargs)
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "network_policy"),
        ({"from_namespaces": ["Bad NS"]}, "network_policy.from_namespaces[0]"),
        ({"from_namespaces": "gateway"}, "network_policy.from_namespaces"),
        ({"from_cidrs": ["10.0.0.1/8"]}, "network_policy.from_cidrs[0]"),
        ({"from_cidrs": ["nope"]}, "network_policy.from_cidrs[0]"),
        ({"from_pod_labels": {"app": "a b"}}, "network_policy.from_pod_labels[app]"),
    ],
)
def test_ingress_policy_errors(kwargs, field):
    with pytest.raises(ValidationError) as info:
        IngressPolicy(**kwargs)
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize("name", ["9llama", "llama.v2", "l" * 64, "Llama"])
def test_inference_names_must_be_dns1035_because_the_service_shares_them(name):
    with pytest.raises(ValidationError) as info:
        build_inference_objects(InferenceSpec(pod=POD, model_uri=URI), name, "serving")
    assert info.value.field == "name"


def test_startup_probe_can_be_left_out_and_keeps_the_readiness_path_without_liveness():
    spec = full_spec(liveness_path=None, startup_timeout_seconds=None)
    container = build_deployment(spec, "llama", "serving")["spec"]["template"]["spec"]["containers"][0]
    assert "startupProbe" not in container and "livenessProbe" not in container
    default = InferenceSpec(pod=POD, model_uri=URI, readiness_path="/readyz")
    probes = default.probes()
    assert probes["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert probes["startupProbe"]["periodSeconds"] == 1 and probes["startupProbe"]["failureThreshold"] == 600


def test_only_the_deployment_names_the_model():
    """Service, HPA, PDB and NetworkPolicy do not depend on the model: a new one must not relabel them."""
    objects = build_inference_objects(full_spec(), "llama", "serving", KEY.task_instance_labels())
    for obj in objects:
        labels, annotations = obj["metadata"]["labels"], obj["metadata"].get("annotations") or {}
        named = MODEL_URI_LABEL in labels or MODEL_URI_LABEL in annotations
        assert named == (obj["kind"] == "Deployment"), obj["kind"]
        assert labels[SELECTOR_LABEL] == "llama"
