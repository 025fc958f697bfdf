"""Canary rollouts against the local cluster, judged on the custom metrics API's request and error counters
(the local cluster's service proxy counts them): a good model is promoted while a client calling the Service
through the API server sees no error; a bad one (its server answers 500 to predictions) is rolled back with
its error rate in the message, the stable Deployment never written; a retry adopts the canary a crashed try
started, and killing the deferred task removes the canary, never the stable Deployment.

The server is inline Python: ``/predict`` fails when its model URI says ``bad``, ``/info`` names the model.
Like the reference server (``serve --drain-seconds``) it drains: on SIGTERM ``/ready`` answers 503 and it
keeps serving 3 s, so a deleted pod leaves the Service before it closes - what a rollout with no client
error needs on any cluster (CI saw one refused connection to a pod that died at once on SIGTERM).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_k8s_ml.errors import ValidationError, WorkloadFailed
from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
from airflow_k8s_ml.testbed.service_traffic import ServiceTraffic
from tests.integration.serving_helpers import context, first_event, run_task

PORT = random.randint(20000, 40000)
SERVER = """
import http.server, json, os, signal, threading
BAD = "bad" in os.environ["MODEL_URI"]
DRAINING = threading.Event()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        status = 500 if BAD and self.path.startswith("/predict") else 200
        if self.path == "/ready" and DRAINING.is_set():
            status = 503
        body = json.dumps({"path": self.path, "model_uri": os.environ["MODEL_URI"]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((os.environ["POD_IP"], int(os.environ["PORT"])), H)
def drain(*_):
    DRAINING.set()
    threading.Timer(3.0, server.shutdown).start()
signal.signal(signal.SIGTERM, drain)
server.serve_forever()
"""
A = "s3://models/digits/step-4/"
B = "s3://models/digits/step-9/"
BAD = "s3://models/digits/bad-step-9/"
WINDOW = {"analysis_seconds": 10, "max_error_rate": 0.05, "min_requests": 1}


def make(namespace: str, model: str, **overrides: Any) -> InferenceDeploymentOperator:
    args: dict[str, Any] = {
        "task_id": "deploy",
        "name": "echo",
        "namespace": namespace,
        "model_uri": model,
        "image": "python:3.11",
        "command": ["python", "-c", SERVER],
        "port": PORT,
        "readiness_path": "/ready",
        "liveness_path": None,
        "replicas": 2,
        "deployment_options": {"probe_period_seconds": 1},
        "smoke_path": "/info",
        "expected_response": {"model_uri": model},
        "rollout_timeout": 60,
    }
    return InferenceDeploymentOperator(**{**args, **overrides})


def traffic(api_client: Any, namespace: str) -> ServiceTraffic:
    """GET ``/predict`` of the echo Service every 100 ms, counted by (status, model that answered)."""
    return ServiceTraffic(
        api_client, namespace, "echo:http", "predict", label=lambda body: json.loads(body)["model_uri"]
    )


@pytest.fixture
def stable(namespace: str, api_client: Any, kube_conn: str) -> Iterator[dict[str, Any]]:
    """Model A deployed without a canary (two pods): the stable revision a canary is tried beside."""
    yield run_task(make(namespace, A), context("deploy", run_id="r1"))


def deployments(api_client: Any, namespace: str) -> dict[str, Any]:
    from kubernetes import client

    items = client.AppsV1Api(api_client).list_namespaced_deployment(namespace).items
    return {d.metadata.name: d for d in items}


def test_a_good_model_is_promoted_while_a_client_sees_no_error(
    namespace: str, api_client: Any, stable: dict[str, Any]
) -> None:
    ctx = context("deploy", run_id="r2")
    with traffic(api_client, namespace) as caller:
        result = run_task(make(namespace, B, canary={"percent": 34, **WINDOW}), ctx, timeout=120)
    assert caller.errors() == {}, f"the client saw errors during the canary: {caller.seen}"
    assert caller.seen[(200, B)] > 0 and caller.seen[(200, A)] > 0, caller.seen
    verdict = result["canary"]
    assert verdict["decision"] == "promote", verdict
    assert verdict["requests"] >= 1 and verdict["errors"] == 0 and verdict["pods"] == 1, verdict
    assert ctx["pushed"]["canary"] == verdict
    assert result["model_uri"] == B and result["revision"] == 2
    assert [(e["revision"], e["model_uri"], e["serving"]) for e in result["model_history"]] == [
        (2, B, True),
        (1, A, False),
    ]
    assert set(deployments(api_client, namespace)) == {"echo"}, "the canary Deployment was not removed"


def test_a_bad_model_is_rolled_back_with_its_error_rate_and_the_stable_one_untouched(
    namespace: str, api_client: Any, stable: dict[str, Any]
) -> None:
    before = deployments(api_client, namespace)["echo"]
    ctx = context("deploy", run_id="r2")
    op = make(namespace, BAD, canary={"percent": 34, **WINDOW}, defer_after=0)  # judged in the trigger
    with traffic(api_client, namespace) as caller, pytest.raises(WorkloadFailed) as failed:
        run_task(op, ctx, timeout=120)
    message = str(failed.value)
    assert f"canary of model {BAD} rolled back" in message
    # judged on its own errors: Airflow fails the task without a retry (a retry would serve it again)
    assert isinstance(failed.value, AirflowFailException) and message.endswith(
        "not retried: a retry would serve this model again"
    )
    # every prediction of the bad model fails; the two counters are read a moment apart, so a request made
    # between the reads can be in one count and not the other
    rate = re.search(r"\(error rate (\d+\.\d+)%\) over max_error_rate 5\.00%", message)
    assert rate is not None and float(rate.group(1)) >= 50, message
    assert f"revision 1 (model {A}) still serving, untouched" in message
    verdict = ctx["pushed"]["canary"]
    assert verdict["decision"] == "rollback" and verdict["errors"] >= 1, verdict
    after = deployments(api_client, namespace)
    assert set(after) == {"echo"}, "the canary Deployment was not removed"
    assert after["echo"].metadata.generation == before.metadata.generation  # never written
    assert caller.seen[(200, A)] > 0 and all(model != A for (status, model) in caller.errors()), caller.seen


def test_a_retry_adopts_the_canary_and_a_kill_removes_it(
    namespace: str, api_client: Any, stable: dict[str, Any]
) -> None:
    import asyncio

    canary = {"percent": 34, **WINDOW}
    with pytest.raises(TaskDeferred):  # the first try defers on the canary's rollout, then its worker dies
        make(namespace, B, canary=canary, defer_after=0).execute(context("deploy", run_id="r2"))
    first = deployments(api_client, namespace)["echo-canary"].metadata.uid
    with pytest.raises(TaskDeferred) as again:
        make(namespace, B, canary=canary, defer_after=0).execute(context("deploy", run_id="r2", try_number=2))
    now = deployments(api_client, namespace)
    assert set(now) == {"echo", "echo-canary"} and now["echo-canary"].metadata.uid == first
    _, kwargs = again.value.trigger.serialize()
    revived = type(again.value.trigger)(**kwargs)
    assert kwargs["name"] == "echo-canary" and kwargs["delete_on_kill"] is True
    asyncio.run(revived.on_kill())
    deadline = time.monotonic() + 30
    while "echo-canary" in deployments(api_client, namespace):
        assert time.monotonic() < deadline, "the canary Deployment was still there 30 s after the kill"
        time.sleep(0.2)
    assert "echo" in deployments(api_client, namespace)


def _until_analysis(op: InferenceDeploymentOperator, ctx: dict[str, Any]) -> dict[str, Any]:
    """Run a try until it defers on the canary's analysis (the CanaryTrigger); its trigger's arguments."""
    try:
        op.execute(ctx)
    except TaskDeferred as deferred:
        pending = deferred
    while type(pending.trigger).__name__ != "CanaryTrigger":
        _, kwargs = pending.trigger.serialize()
        event = asyncio.run(first_event(type(pending.trigger)(**kwargs), 60))
        try:
            getattr(op, pending.method_name)(ctx, event=event, **(pending.kwargs or {}))
        except TaskDeferred as again:
            pending = again
    return pending.trigger.serialize()[1]


def test_a_retry_judges_the_analysis_window_its_crashed_try_opened(
    namespace: str, api_client: Any, stable: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """The first try opens the window and dies in the triggerer's hands; the retry adopts the canary and
    judges the same window (same start, same counters at the start), not a new one."""
    canary = {"percent": 34, "analysis_seconds": 300, "max_error_rate": 0.05, "min_requests": 1}
    first = _until_analysis(make(namespace, B, canary=canary, defer_after=0), context("deploy", run_id="r2"))
    capfd.readouterr()
    retry = _until_analysis(
        make(namespace, B, canary=canary, defer_after=0), context("deploy", run_id="r2", try_number=2)
    )
    assert retry["uid"] == first["uid"], "the retry started another canary"
    assert (retry["started_at"], retry["baseline"]) == (first["started_at"], first["baseline"])
    assert "canary analysis resumed: its window opened " in capfd.readouterr().out


@pytest.mark.parametrize(
    ("canary", "field"),
    [
        ({"percent": 100}, "canary.percent"),
        ({"percent": 20, "analysis_seconds": 0}, "canary.analysis_seconds"),
        ({"percent": 20, "colour": "red"}, "canary.colour"),
    ],
)
def test_bad_canary_fails_at_dag_parse_time(canary: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        make("ns", B, canary=canary)
    assert info.value.field == field
