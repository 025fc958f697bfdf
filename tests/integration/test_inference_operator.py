"""InferenceDeploymentOperator against the local cluster with the real model server (``workloads.serve``).

Each scenario runs the operator as Airflow would (``serving_helpers.run_task``): ``execute``
(``TaskDeferred``), the trigger revived from its serialized form and run to its event, then the deferred
method. A background poller calls the Service
through the API server's proxy all along, to show that a ready replica answered at every moment and which
model it was.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from airflow_k8s_ml.errors import DeadlineExceeded, WorkloadFailed
from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
from tests.integration.serving_helpers import context, run_task

pytest.importorskip("torch")

SERVE = ["python", "-m", "airflow_k8s_ml.workloads.serve"]
#: Pod IPs of concurrently running local clusters can coincide (each allocates from 127.42.0.1), so a
#: per-session port keeps this module's probes and proxy calls on its own servers.
PORT = random.randint(20000, 40000)
SAMPLE = {"instances": [[0.0] * 64]}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Model A (seeded, step-1), model B (the same weights committed under another URI), a missing one."""
    root = tmp_path_factory.mktemp("serve-models")
    env = {k: v for k, v in os.environ.items() if k not in {"MODEL_URI", "INPUT_URI", "OUTPUT_URI"}}
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_k8s_ml.workloads.seed", "--base-model-uri", f"file://{root}/a"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    shutil.copytree(root / "a" / "step-1", root / "b" / "step-1")
    return {
        "a": f"file://{root}/a/step-1/",
        "b": f"file://{root}/b/step-1/",
        "missing": f"file://{root}/missing/step-9/",
    }


def make(namespace: str, model_uri: str, **overrides: Any) -> InferenceDeploymentOperator:
    args: dict[str, Any] = {
        "task_id": "deploy",
        "name": "digits",
        "namespace": namespace,
        "model_uri": {"uri": model_uri, "step": 1},
        "image": "python:3.11",
        "command": SERVE,
        "replicas": 1,
        "port": PORT,
        "deployment_options": {"probe_period_seconds": 1},
        "smoke_path": "/predict",
        "smoke_request": SAMPLE,
        "expected_response": {"model_uri": model_uri, "step": 1},
        "rollout_timeout": 60,
        "smoke_timeout": 20,
        "defer_after": 0,  # these scenarios exercise the deferred wait (the trigger) and its rollbacks
    }
    return InferenceDeploymentOperator(**{**args, **overrides})


class Poller:
    """Calls POST /predict through the service proxy every 50 ms; records (ok, model) per call."""

    def __init__(self, namespace: str) -> None:
        from airflow_k8s_ml.kube.sync_client import KubeClient

        self.client = KubeClient("kubernetes_default", namespace)
        self.namespace = namespace
        self.answers: list[tuple[bool, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from airflow_k8s_ml.kube.serving_ops import proxy_request

        while not self._stop.is_set():
            try:
                response = proxy_request(
                    self.client, self.namespace, "digits", "http", "/predict", body=SAMPLE
                )
                ok = response.status == 200
                detail = json.loads(response.body).get("model_uri", "") if ok else response.body[:200]
            except Exception as exc:
                ok, detail = False, repr(exc)
            self.answers.append((ok, detail))
            time.sleep(0.05)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        seen = len(self.answers)  # a few more answers after the task ended: the state it left behind
        deadline = time.monotonic() + 10
        while len(self.answers) < seen + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._thread.join(10)
        self.client.close()

    def failures(self) -> list[str]:
        return [detail for ok, detail in self.answers if not ok]

    def models(self) -> list[str]:
        """The models that answered, in order, consecutive duplicates collapsed."""
        out: list[str] = []
        for ok, detail in self.answers:
            if ok and (not out or out[-1] != detail):
                out.append(detail)
        return out


def replica_sets(api_client: Any, namespace: str) -> list[Any]:
    from kubernetes import client

    return client.AppsV1Api(api_client).list_namespaced_replica_set(namespace).items


def deployment(api_client: Any, namespace: str) -> Any:
    from kubernetes import client

    return client.AppsV1Api(api_client).read_namespaced_deployment("digits", namespace)


@pytest.mark.usefixtures("kube_conn")
def test_deploy_rerun_and_roll_back_a_broken_model(
    namespace: str, api_client: Any, models: dict[str, str]
) -> None:
    first = run_task(make(namespace, models["a"]), context("deploy"), kind="Deployment")
    assert first["revision"] == 1 and first["model_uri"] == models["a"]
    assert first["changes"] == {"Deployment": "created", "Service": "created"}
    assert first["smoke"]["ok"] and first["smoke"]["readiness"]["status"] == 200
    assert first["smoke"]["request"]["status"] == 200
    assert first["service_url"] == f"/api/v1/namespaces/{namespace}/services/digits:http/proxy/"
    live = deployment(api_client, namespace)
    assert live.metadata.annotations["airflow-k8s-ml/model-uri"] == models["a"]
    assert live.metadata.labels["airflow-k8s-ml/dag-id"] == "nightly"

    rerun = run_task(make(namespace, models["a"]), context("deploy"))
    assert rerun["revision"] == 1 and set(rerun["changes"].values()) == {"unchanged"}
    assert len(replica_sets(api_client, namespace)) == 1

    ctx = context("deploy")
    broken = make(
        namespace,
        models["missing"],
        deployment_options={"probe_period_seconds": 1, "progress_deadline_seconds": 4},
    )
    with Poller(namespace) as poller:
        with pytest.raises(WorkloadFailed) as failed:
            run_task(broken, ctx)
    message = str(failed.value)
    headline = 'rollout of revision 2 failed (ProgressDeadlineExceeded): deployment "digits" exceeded its'
    assert message.startswith(f"{headline} progress deadline")
    # ...and why: the new pods crash because the model does not load.
    assert "container server" in message and "exit code 1" in message
    assert "has no MANIFEST.json" in message
    assert f"rolled back: revision 3 (the template of revision 1, model {models['a']}) is serving" in message
    assert poller.failures() == [] and poller.models() == [models["a"]] and len(poller.answers) >= 10
    assert ctx["pushed"]["rollback"]["serving_revision"] == 3 and ctx["pushed"]["rollback"]["healthy"]
    live = deployment(api_client, namespace)
    env = {e.name: e.value for e in live.spec.template.spec.containers[0].env}
    assert (
        env["MODEL_URI"] == models["a"]
        and live.metadata.annotations["deployment.kubernetes.io/revision"] == "3"
    )


@pytest.mark.usefixtures("kube_conn")
def test_new_model_rolls_out_without_a_gap_and_a_smoke_mismatch_rolls_back(
    namespace: str, api_client: Any, models: dict[str, str]
) -> None:
    assert run_task(make(namespace, models["a"]), context("deploy"))["revision"] == 1
    with Poller(namespace) as poller:
        second = run_task(make(namespace, models["b"]), context("deploy"))
    assert second["revision"] == 2 and second["changes"]["Deployment"] == "configured"
    assert poller.failures() == [] and poller.models() == [models["a"], models["b"]]

    ctx = context("deploy")
    mismatch = make(namespace, models["a"], expected_response={"model_uri": "file:///elsewhere/"})
    with pytest.raises(WorkloadFailed) as failed:
        run_task(mismatch, ctx)
    message = str(failed.value)
    assert (
        'smoke test of revision 3 failed: POST /predict: $.model_uri: expected "file:///elsewhere/"'
        in message
    )
    assert f"rolled back: revision 4 (the template of revision 2, model {models['b']}) is serving" in message


@pytest.mark.usefixtures("kube_conn")
def test_first_deploy_that_never_becomes_ready_is_left_in_place_and_fails_clearly(
    namespace: str, api_client: Any, models: dict[str, str]
) -> None:
    op = make(namespace, models["missing"], rollout_timeout=4)
    with pytest.raises(DeadlineExceeded) as failed:
        run_task(op, context("deploy"))
    message = str(failed.value)
    assert message.startswith("rollout of revision 1 did not finish: deadline 4s exceeded")
    assert f"nothing to roll back to: this was the first revision of deployment {namespace}/digits" in message
    assert deployment(api_client, namespace).metadata.name == "digits"
