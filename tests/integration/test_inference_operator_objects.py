"""The optional serving objects against the local cluster: HPA, PDB and NetworkPolicy are applied with the
Deployment, the HPA's replica count survives a re-apply, dropping an argument deletes its object, a rerun of
the same desired state sends no write at all, and the rollout wait logs its progress.

The server is a few lines of inline Python (no model): this module is about the objects, not inference.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

import pytest

from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import admin
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
SERVING = ("deployments", "services", "horizontalpodautoscalers", "poddisruptionbudgets", "networkpolicies")


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
def test_hpa_pdb_network_policy_applied_kept_and_pruned(
    namespace: str, api_client: Any, cluster: ClusterThread
) -> None:
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

    # The HPA scales up (done here by hand through /scale): a re-apply must not put it back to min. The HPA
    # reads real CPU figures, which for idle servers would take it back to 2 at its next sync: its metric is
    # held at the target (80 %), where it keeps whatever count the Deployment has.
    admin(cluster, "metrics", {"namespace": namespace, "name": "echo", "metric": "cpu", "value": 80})
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


def writes() -> Counter[tuple[str, str]]:
    """Write requests (POST/PATCH/PUT/DELETE) the API server has answered, by verb and resource, from its
    ``apiserver_request_total`` (the cluster's own controllers do not go through HTTP)."""
    from airflow_k8s_ml.kube.sync_client import KubeClient

    client = KubeClient("kubernetes_default")
    try:
        text = client.get_raw("/metrics").decode()
    finally:
        client.close()
    counts: Counter[tuple[str, str]] = Counter()
    pattern = r'apiserver_request_total\{verb="(\w+)",resource="([^"]*)",code="\d+"\} (\d+)'
    for verb, resource, n in re.findall(pattern, text):
        if verb in ("POST", "PATCH", "PUT", "DELETE") and resource in SERVING:
            counts[(verb, resource)] += int(n)
    return counts


def metadata_of(api_client: Any, namespace: str) -> dict[str, Any]:
    """Per object: resourceVersion, generation, labels, annotations, managedFields (a write moves one)."""
    from kubernetes import client

    objects = {
        "Deployment": client.AppsV1Api(api_client).read_namespaced_deployment("echo", namespace),
        "Service": client.CoreV1Api(api_client).read_namespaced_service("echo", namespace),
        "HPA": client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler(
            "echo", namespace
        ),
        "PDB": client.PolicyV1Api(api_client).read_namespaced_pod_disruption_budget("echo", namespace),
    }
    return {
        kind: (
            obj.metadata.resource_version,
            obj.metadata.generation,
            obj.metadata.labels,
            obj.metadata.annotations,
            [(f.manager, f.operation, f.time) for f in obj.metadata.managed_fields or []],
        )
        for kind, obj in objects.items()
    }


def task_log(capfd: pytest.CaptureFixture[str]) -> str:
    """What the task and its trigger logged (Airflow's structlog loggers write to the console here)."""
    captured = capfd.readouterr()
    return captured.out + captured.err


@pytest.mark.usefixtures("kube_conn")
def test_rerun_of_the_same_state_writes_nothing_and_a_new_model_writes_the_deployment_alone(
    namespace: str, api_client: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    run_task(make(namespace, network_policy=None), context("deploy"))
    before, sent = metadata_of(api_client, namespace), writes()
    task_log(capfd)

    cleared = run_task(make(namespace, network_policy=None), context("deploy"))  # the same task instance
    next_run = run_task(make(namespace, network_policy=None), context("deploy", run_id="scheduled__2"))
    assert writes() == sent, "a rerun of the same desired state sent a write"
    assert metadata_of(api_client, namespace) == before
    everything_unchanged = {
        "Deployment": "unchanged",
        "Service": "unchanged",
        "HorizontalPodAutoscaler": "unchanged",
        "PodDisruptionBudget": "unchanged",
    }
    assert cleared["changes"] == everything_unchanged == next_run["changes"]
    assert cleared["revision"] == next_run["revision"] == 1
    log = task_log(capfd)
    assert (
        log.count(
            "applied Deployment unchanged, Service unchanged, HorizontalPodAutoscaler unchanged, "
            "PodDisruptionBudget unchanged"
        )
        == 2
    )
    assert "configured" not in log

    new_model = "s3://models/digits/step-5/"
    third = make(
        namespace, network_policy=None, model_uri=new_model, expected_response={"model_uri": new_model}
    )
    result = run_task(third, context("deploy", run_id="scheduled__3"))
    assert (
        result["changes"] == {**everything_unchanged, "Deployment": "configured"} and result["revision"] == 2
    )
    delta = writes()
    delta.subtract(sent)
    assert +delta == Counter({("PATCH", "deployments"): 1})
    after = metadata_of(api_client, namespace)
    for kind in ("Service", "HPA", "PDB"):  # (the PDB's and HPA's controllers wrote status meanwhile)
        assert after[kind][1:] == before[kind][1:], kind
    # The Deployment records the run that changed it; the others still name the run that created them.
    assert after["Deployment"][2]["airflow-k8s-ml/run-id"] == "scheduled__3"
    assert after["Service"][2]["airflow-k8s-ml/run-id"].startswith("manual__2024-06-01")


def execute_or_defer(op: InferenceDeploymentOperator, ctx: dict[str, Any]) -> bool:
    """Run the task to its end like Airflow; True if it deferred on the way."""
    from airflow.sdk.exceptions import TaskDeferred

    try:
        op.execute(ctx)
    except TaskDeferred:
        run_task(op, ctx)  # (execute again: it finds the rollout where the deferral left it)
        return True
    return False


ROLLING = {"network_policy": None, "autoscaling": None, "pdb_min_available": None, "replicas": 2}
LOGGERS = {"trigger": "airflow_k8s_ml.triggers.workload.WorkloadTrigger", "worker": "operators.inference"}


@pytest.mark.parametrize(("defer_after", "where"), [(0, "trigger"), (30, "worker")])
@pytest.mark.usefixtures("kube_conn")
def test_the_rollout_logs_progress_once_per_change_deferred_or_in_the_worker(
    namespace: str, capfd: pytest.CaptureFixture[str], defer_after: float, where: str
) -> None:
    run_task(make(namespace, **ROLLING), context("deploy"))
    task_log(capfd)
    new_model = "s3://models/digits/step-5/"
    op = make(namespace, **ROLLING, model_uri=new_model, expected_response={"model_uri": new_model})
    op.defer_after = defer_after
    assert execute_or_defer(op, context("deploy")) == (where == "trigger")
    log = task_log(capfd)
    pattern = (
        r"rollout revision 2: (\d/2 updated, \d ready, \d available(?:, \d old)?) - (.*?)\s*\[([^\]]+)\]"
    )
    lines = re.findall(pattern, log)
    counts = [c for c, _, _ in lines]
    assert len(lines) >= 3, log
    assert len(set(counts)) == len(counts), f"a line repeated counts that did not change: {counts}"
    assert all(LOGGERS[where] in logger for _, _, logger in lines), lines
    # While the rollout is in progress (kubectl's own words), then done; before the smoke test.
    assert all(m.startswith('Waiting for deployment "echo" rollout to finish') for _, m, _ in lines[:-1])
    assert lines[-1][:2] == ("2/2 updated, 2 ready, 2 available", 'deployment "echo" successfully rolled out')
    assert any(" old" in c for c in counts)  # seen mid-rollout: old pods still there
    assert log.index("successfully rolled out") < log.index("rolled out at revision 2")


@pytest.mark.usefixtures("kube_conn")
def test_a_rollout_longer_than_defer_after_is_handed_to_the_trigger(
    namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    run_task(make(namespace, **ROLLING), context("deploy"))
    slow = ["python", "-c", "import time\ntime.sleep(1.5)\n" + SERVER]  # a model that loads in 1.5 s
    new_model = "s3://models/digits/step-6/"
    op = make(
        namespace, **ROLLING, command=slow, model_uri=new_model, expected_response={"model_uri": new_model}
    )
    op.defer_after = 0.3
    task_log(capfd)
    assert execute_or_defer(op, context("deploy"))
    log = task_log(capfd)
    assert "rollout still in progress after 0.3s; deferring to the triggerer" in log
    assert re.search(r"successfully rolled out\s*\[airflow_k8s_ml.triggers.workload.WorkloadTrigger\]", log)
