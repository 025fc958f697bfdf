"""The optional serving objects against the local cluster: HPA, PDB and NetworkPolicy are applied with the
Deployment, the HPA's replica count survives a re-apply, and dropping an argument deletes its object.

The server is a few lines of inline Python (no model): this module is about the objects, not inference.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
from tests.integration.serving_helpers import context, run_task

PORT = random.randint(20000, 40000)  # see test_inference_operator.PORT
SERVER = """
import http.server, json, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"path": self.path, "model_uri": os.environ["MODEL_URI"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((os.environ["POD_IP"], int(os.environ["PORT"])), H).serve_forever()
"""
MODEL = "s3://models/digits/step-4/"


def make(namespace: str, **overrides: Any) -> InferenceDeploymentOperator:
    args: dict[str, Any] = {
        "task_id": "deploy",
        "name": "echo",
        "namespace": namespace,
        "model_uri": MODEL,
        "image": "python:3.11",
        "command": ["python", "-c", SERVER],
        "port": PORT,
        "readiness_path": "/ready",
        "liveness_path": None,
        "requests": {"cpu": "50m"},
        "deployment_options": {"probe_period_seconds": 1},
        "autoscaling": {"min_replicas": 2, "max_replicas": 4, "target_cpu_utilization": 80},
        "pdb_min_available": 1,
        "network_policy": {"from_namespaces": ["airflow"], "from_pod_labels": {"role": "client"}},
        "smoke_path": "/info",
        "expected_response": {"model_uri": MODEL, "$.path": "/info"},
        "rollout_timeout": 30,
    }
    return InferenceDeploymentOperator(**{**args, **overrides})


@pytest.mark.usefixtures("kube_conn")
def test_hpa_pdb_network_policy_applied_kept_and_pruned(namespace: str, api_client: Any) -> None:
    from kubernetes import client

    apps = client.AppsV1Api(api_client)
    first = run_task(make(namespace), context("deploy"))
    assert first["changes"] == {
        "NetworkPolicy": "created",
        "Deployment": "created",
        "Service": "created",
        "HorizontalPodAutoscaler": "created",
        "PodDisruptionBudget": "created",
    }
    assert first["smoke"]["request"]["body"] == json.dumps({"path": "/info", "model_uri": MODEL})
    assert apps.read_namespaced_deployment("echo", namespace).spec.replicas == 2
    hpa = client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler("echo", namespace)
    assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (2, 4)
    assert hpa.spec.scale_target_ref.name == "echo"
    policy = client.NetworkingV1Api(api_client).read_namespaced_network_policy("echo", namespace)
    peers = policy.spec.ingress[0]._from
    assert peers[0].namespace_selector.match_labels == {"kubernetes.io/metadata.name": "airflow"}
    assert peers[1].pod_selector.match_labels == {"role": "client"}
    assert policy.spec.ingress[0].ports[0].port == PORT

    # The HPA scales up (done here by hand through /scale): a re-apply must not put it back to min.
    apps.patch_namespaced_deployment_scale("echo", namespace, {"spec": {"replicas": 3}})
    again = run_task(make(namespace), context("deploy"))
    assert again["changes"]["Deployment"] == "unchanged" and again["revision"] == 1
    assert apps.read_namespaced_deployment("echo", namespace).spec.replicas == 3

    fixed = make(namespace, autoscaling=None, replicas=2, pdb_min_available=None, network_policy=None)
    pruned = run_task(fixed, context("deploy"))
    assert pruned["changes"]["HorizontalPodAutoscaler"] == "deleted"
    assert pruned["changes"]["PodDisruptionBudget"] == "deleted"
    assert pruned["changes"]["NetworkPolicy"] == "deleted"
    assert apps.read_namespaced_deployment("echo", namespace).spec.replicas == 2
    assert (
        client.AutoscalingV2Api(api_client).list_namespaced_horizontal_pod_autoscaler(namespace).items == []
    )
    assert client.PolicyV1Api(api_client).list_namespaced_pod_disruption_budget(namespace).items == []
