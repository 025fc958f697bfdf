"""kube's request layer: requests as values, answers judged once, operations as plans, one retry loop,
and the sync and async clients offering the same methods (pure: no server, no clients connected)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_k8s_ml.errors import ApiError, K8sMLError
from airflow_k8s_ml.kube import operations as ops
from airflow_k8s_ml.kube.async_client import AsyncKube
from airflow_k8s_ml.kube.conversation import Conversation, Step
from airflow_k8s_ml.kube.requests import (
    Reply,
    Request,
    create_request,
    delete_request,
    log_request,
    patch_request,
    read_reply,
    watch_request,
)
from airflow_k8s_ml.kube.resources import resource_for
from airflow_k8s_ml.kube.retry import RetryPolicy
from airflow_k8s_ml.kube.sync_client import KubeClient

JOBS = resource_for("batch/v1", "Job")
JOB: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ft", "namespace": "ml"}}

#: The one method only one client has: a blocking wait (triggers wait through the shared watch instead).
SYNC_ONLY = {"wait_gone"}


def _methods(cls: type) -> dict[str, Any]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_") and inspect.isfunction(v)}


def test_sync_and_async_clients_have_the_same_methods_with_the_same_signatures() -> None:
    sync, concurrent = _methods(KubeClient), _methods(AsyncKube)
    assert set(sync) - SYNC_ONLY == set(concurrent)
    for name, method in concurrent.items():
        assert inspect.iscoroutinefunction(method), name
        blocking, awaited = inspect.signature(sync[name]), inspect.signature(method)
        assert list(blocking.parameters.values()) == list(awaited.parameters.values()), name
        assert blocking.return_annotation == awaited.return_annotation, name


def test_one_api_error_for_the_whole_package() -> None:
    from airflow_k8s_ml.kube import errors

    assert errors.ApiError is ApiError and issubclass(ApiError, K8sMLError)


def test_every_write_asks_for_strict_field_validation() -> None:
    created = create_request(JOB, "default")
    assert (created.method, created.path) == ("POST", "/apis/batch/v1/namespaces/ml/jobs")
    assert ("fieldValidation", "Strict") in created.query and ("dryRun", "All") not in created.query
    applied = patch_request(JOBS, "ml", "ft", JOB, patch_type="apply", dry_run=True)
    assert applied.query == (
        ("fieldManager", "airflow-k8s-ml"),
        ("force", "true"),
        ("fieldValidation", "Strict"),
        ("dryRun", "All"),
    )
    assert applied.headers["Content-Type"] == "application/apply-patch+yaml"
    status = patch_request(JOBS, "ml", "ft", {"status": {}}, subresource="status")
    assert status.path.endswith("/jobs/ft/status") and ("fieldValidation", "Strict") in status.query
    with pytest.raises(K8sMLError, match="patch_type"):
        patch_request(JOBS, "ml", "ft", {}, patch_type="update")


def test_delete_log_and_watch_requests() -> None:
    delete = delete_request(JOBS, "ml", "ft", propagation="Background", uid="u1")
    assert delete.body["propagationPolicy"] == "Background" and delete.body["preconditions"] == {"uid": "u1"}
    tail = log_request("ml", "p", container="c", tail_lines=5, previous=True)
    assert tail.path == "/api/v1/namespaces/ml/pods/p/log" and tail.decode == "text"
    assert tail.query == (("tailLines", "5"), ("container", "c"), ("previous", "true"))
    follow = log_request(
        "ml", "p", container="c", follow=True, timestamps=True, since_time="2024-01-01T00:00:00Z"
    )
    assert follow.decode == "stream" and follow.read_timeout is None
    watch = watch_request(
        JOBS, "ml", resource_version="7", timeout_seconds=0, read_timeout=5.0, bookmarks=True
    )
    assert watch.query == (
        ("watch", "true"),
        ("resourceVersion", "7"),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", "1"),
    )
    assert watch.decode == "stream" and watch.read_timeout == 5.0


def test_an_answer_is_judged_in_one_place() -> None:
    assert read_reply(Reply(200, data=b'{"a": 1}')) == {"a": 1}
    assert read_reply(Reply(200, data=b"")) is None
    assert read_reply(Reply(200, data=b"hi"), "text") == "hi"
    assert read_reply(Reply(200, data=b"\x00"), "bytes") == b"\x00"
    marker = object()
    assert read_reply(Reply(200, stream=marker), "stream") is marker
    refused = status(400, "BadRequest", 'strict decoding error: unknown field "spec.bogusField"')
    with pytest.raises(ApiError) as caught:
        read_reply(refused)
    assert caught.value.status == 400 and 'unknown field "spec.bogusField"' in str(caught.value)


# -- plans, run against scripted answers ---------------------------------------------------------------
def status(code: int, reason: str, message: str = "", headers: dict[str, str] | None = None) -> Reply:
    body = {"kind": "Status", "code": code, "reason": reason, "message": message or reason}
    return Reply(code, headers or {}, json.dumps(body).encode())


def ok(body: Any = None) -> Reply:
    return Reply(200, {}, json.dumps(body).encode() if body is not None else b"")


class Script:
    """Answers in order; records what was sent, the waits and the credential reloads asked for."""

    def __init__(self, *answers: Reply | ApiError) -> None:
        self.answers: Iterator[Reply | ApiError] = iter(answers)
        self.sent: list[Request] = []
        self.waits: list[float] = []
        self.refreshes = 0

    def run(self, plan: ops.Plan[Any], policy: RetryPolicy | None = None) -> Any:
        talk: Conversation[Any] = Conversation(plan, policy or RetryPolicy(backoffs=(0.1, 0.2)))
        step: Step | None = talk.start()
        while step is not None:
            self.refreshes += step.refresh
            if step.wait:
                self.waits.append(step.wait)
            self.sent.append(step.request)
            answer = next(self.answers)
            step = talk.failed(answer) if isinstance(answer, ApiError) else talk.answered(answer)
        assert next(self.answers, None) is None, "the plan stopped before using every answer"
        return talk.result


def test_get_is_none_when_absent_and_delete_says_whether_it_deleted() -> None:
    assert Script(status(404, "NotFound")).run(ops.get(JOBS, "ml", "ft")) is None
    assert Script(ok(JOB)).run(ops.get(JOBS, "ml", "ft")) == JOB
    assert Script(ok({})).run(ops.delete(JOBS, "ml", "ft")) is True
    assert Script(status(404, "NotFound")).run(ops.delete(JOBS, "ml", "ft")) is False
    assert Script(status(409, "Conflict")).run(ops.delete(JOBS, "ml", "ft", uid="old")) is False
    with pytest.raises(ApiError):
        Script(status(409, "Conflict")).run(ops.delete(JOBS, "ml", "ft"))


def test_list_reads_pages_and_relists_whole_when_the_snapshot_expired() -> None:
    first = {"metadata": {"continue": "t1"}, "items": [{"metadata": {"name": "a"}}]}
    script = Script(
        ok(first), status(410, "Expired"), ok({"metadata": {"resourceVersion": "9"}, "items": []})
    )
    items, version = script.run(ops.list_snapshot(JOBS, "ml", label_selector="app=x"))
    assert (items, version) == ([], "9")
    assert [dict(r.query).get("continue") for r in script.sent] == [None, "t1", None]
    assert [dict(r.query).get("limit") for r in script.sent] == [str(ops.PAGE_SIZE)] * 2 + [None]
    listed = Script(ok({"items": [{"metadata": {"name": "a"}}]})).run(ops.list_items(JOBS, "ml"))
    assert listed == [{"metadata": {"name": "a"}, "apiVersion": "batch/v1", "kind": "Job"}]


def test_apply_creates_or_applies_and_says_which() -> None:
    created = Script(status(404, "NotFound"), ok({**JOB, "metadata": {"resourceVersion": "1"}}))
    assert created.run(ops.apply(JOB, "default"))[1] == "created"
    raced = Script(
        status(404, "NotFound"),
        status(409, "AlreadyExists"),
        ok({"metadata": {"resourceVersion": "1"}}),
        ok({"metadata": {"resourceVersion": "1"}}),
    )
    assert raced.run(ops.apply(JOB, "default"))[1] == "unchanged"
    assert [r.method for r in raced.sent] == ["GET", "POST", "GET", "PATCH"]
    changed = Script(ok({"metadata": {"resourceVersion": "1"}}), ok({"metadata": {"resourceVersion": "2"}}))
    assert changed.run(ops.apply(JOB, "default"))[1] == "configured"


def test_pods_of_a_job_fall_back_to_the_legacy_label() -> None:
    script = Script(ok({"items": []}), ok({"items": [{"metadata": {"name": "p"}}]}))
    assert [p["metadata"]["name"] for p in script.run(ops.pods_of("Job", "ft", "ml"))] == ["p"]
    assert [dict(r.query)["labelSelector"] for r in script.sent] == [
        "batch.kubernetes.io/job-name=ft",
        "job-name=ft",
    ]
    assert Script().run(ops.pods_of("Deployment", "d", "ml")) == []


def test_log_tail_and_warning_events() -> None:
    assert Script(status(400, "BadRequest", "container not started")).run(ops.log_tail("p", "ml")) == ""
    assert Script(Reply(200, {}, b"a\nb\n")).run(ops.log_tail("p", "ml", lines=2)) == "a\nb\n"
    event = {
        "type": "Warning",
        "reason": "BackOff",
        "message": "restarting",
        "involvedObject": {"kind": "Pod", "name": "p", "uid": "u-pod"},
    }
    job = {**JOB, "metadata": {**JOB["metadata"], "uid": "u-job"}}
    given = Script(ok({"items": [event]}))
    assert given.run(ops.warning_events(job, "default", [{"metadata": {"uid": "u-pod"}}])) == [
        "Pod/p BackOff: restarting"
    ]
    assert dict(given.sent[0].query)["fieldSelector"] == "type=Warning"
    listed = Script(ok({"items": []}), ok({"items": []}), ok({"items": [event]}))
    assert listed.run(ops.warning_events(job, "default")) == []  # no pods found: the pod's event is not ours


# -- the conversation: retries, credential reloads, streams --------------------------------------------
def test_transient_failures_are_retried_with_the_policys_waits() -> None:
    script = Script(status(500, "InternalError"), ApiError(0, "ConnectionResetError", "reset"), ok(JOB))
    assert script.run(ops.get(JOBS, "ml", "ft")) == JOB
    assert script.waits == [0.1, 0.2] and len(script.sent) == 3
    throttled = Script(status(429, "TooManyRequests", headers={"Retry-After": "3"}), ok(JOB))
    throttled.run(ops.get(JOBS, "ml", "ft"))
    assert throttled.waits == [3.0]
    exhausted = Script(*[status(503, "ServiceUnavailable")] * 3)
    with pytest.raises(ApiError) as caught:
        exhausted.run(ops.get(JOBS, "ml", "ft"))
    assert caught.value.status == 503


def test_a_401_reloads_the_credentials_once() -> None:
    script = Script(status(401, "Unauthorized"), ok(JOB))
    assert script.run(ops.get(JOBS, "ml", "ft")) == JOB and script.refreshes == 1
    with pytest.raises(ApiError):
        Script(status(401, "Unauthorized"), status(401, "Unauthorized")).run(ops.get(JOBS, "ml", "ft"))


def test_answers_are_not_retried_and_streams_are_opened_once() -> None:
    with pytest.raises(ApiError) as caught:
        Script(status(422, "Invalid", "spec.template: Required value")).run(
            ops.one(create_request(JOB, "ml"))
        )
    assert caught.value.status == 422
    watch = watch_request(JOBS, "ml", resource_version="1", timeout_seconds=5, read_timeout=10)
    with pytest.raises(ApiError):
        Script(status(503, "ServiceUnavailable")).run(ops.one(watch))
    opened = Script(status(401, "Unauthorized"), Reply(200, stream="the response"))
    assert opened.run(ops.one(watch)) == "the response" and opened.refreshes == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: ops.get(JOBS, "ml", "ft"),
        lambda: ops.list_items(JOBS, None),
        lambda: ops.log_tail("p", "ml"),
    ],
)
def test_reads_send_no_strict_parameter(make: Callable[[], ops.Plan[Any]]) -> None:
    request = next(make())
    assert request.method == "GET" and ("fieldValidation", "Strict") not in request.query
