"""batch/v1 Job semantics against the local cluster, driven by the official ``kubernetes`` client over HTTPS.

Pods really run (``python -c``) under the local kubelet; timings come from the fast test settings (job
back-off 0.2 s, crash-loop back-off 0.2 s), so each test takes a second or two.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.cluster_fixtures import python_cmd, wait_for

TERMINAL = ("Complete", "Failed")


def job_body(name: str, code: str, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": restart,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "main", "image": "python:3.11", "command": python_cmd(code)}],
                }
            },
            **spec,
        },
    }


def conditions(job: Any) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason or "") for c in (job.status.conditions or [])]


def watch_until_terminal(
    batch: Any, namespace: str, name: str, timeout: int = 30
) -> tuple[Any, list[list[str]]]:
    """Watch the Job and return its terminal state plus every distinct condition-type sequence seen."""
    from kubernetes import watch

    seen: list[list[str]] = []
    w = watch.Watch()
    for event in w.stream(
        batch.list_namespaced_job, namespace, field_selector=f"metadata.name={name}", timeout_seconds=timeout
    ):
        job = event["object"]
        types = [c.type for c in job.status.conditions or []]
        if not seen or seen[-1] != types:
            seen.append(types)
        if any(c.type in TERMINAL and c.status == "True" for c in job.status.conditions or []):
            w.stop()
            return job, seen
    raise AssertionError(f"job {name} did not finish; condition history {seen}")


def job_pods(core: Any, namespace: str, name: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={name}").items
    return sorted(pods, key=lambda p: p.metadata.creation_timestamp)


def events_of(core: Any, namespace: str, name: str) -> list[tuple[str, str, str]]:
    items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.type, e.reason, e.message) for e in items]


def replay(list_fn: Callable[..., Any], namespace: str, since: str) -> list[dict[str, Any]]:
    """Every watch event after resourceVersion ``since`` (the server keeps the history): an exact record
    of what happened, with no polling race."""
    from kubernetes import watch

    return list(watch.Watch().stream(list_fn, namespace, resource_version=since, timeout_seconds=1))


def test_success_adds_success_criteria_met_then_complete(batch: Any, core: Any, namespace: str) -> None:
    created = batch.create_namespaced_job(namespace, job_body("pi", "print('done')"))
    uid = created.metadata.uid
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert created.spec.template.metadata.labels == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid,
        "job-name": "pi",
    }
    assert (created.spec.backoff_limit, created.spec.completions, created.spec.parallelism) == (6, 1, 1)
    assert (created.spec.completion_mode, created.spec.suspend) == ("NonIndexed", False)

    job, history = watch_until_terminal(batch, namespace, "pi")
    assert history[-2:] == [["SuccessCriteriaMet"], ["SuccessCriteriaMet", "Complete"]]
    assert conditions(job) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached"),
    ]
    assert job.status.conditions[1].message == "Reached expected number of succeeded pods"
    assert job.status.succeeded == 1 and not job.status.active and not job.status.failed
    assert job.status.completion_time is not None and job.status.start_time is not None
    [pod] = job_pods(core, namespace, "pi")
    assert pod.status.phase == "Succeeded" and not pod.metadata.finalizers
    [ref] = pod.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "Job",
        "pi",
        uid,
        True,
        True,
    )
    recorded = events_of(core, namespace, "pi")
    assert ("Normal", "SuccessfulCreate", f"Created pod: {pod.metadata.name}") in recorded
    assert ("Normal", "Completed", "Job completed") in recorded


def test_never_backoff_limit_gives_exactly_three_failed_pods(batch: Any, core: Any, namespace: str) -> None:
    batch.create_namespaced_job(namespace, job_body("fail", "import sys; sys.exit(3)", backoffLimit=2))
    job, history = watch_until_terminal(batch, namespace, "fail")
    assert history[-2:] == [["FailureTarget"], ["FailureTarget", "Failed"]]
    assert conditions(job) == [
        ("FailureTarget", "True", "BackoffLimitExceeded"),
        ("Failed", "True", "BackoffLimitExceeded"),
    ]
    assert job.status.conditions[1].message == "Job has reached the specified backoff limit"
    assert job.status.failed == 3 and job.status.completion_time is None
    pods = job_pods(core, namespace, "fail")
    assert [p.status.phase for p in pods] == ["Failed"] * 3
    assert ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit") in events_of(
        core, namespace, "fail"
    )


def test_active_deadline_kills_and_counts_the_running_pod(batch: Any, core: Any, namespace: str) -> None:
    since = core.list_namespaced_pod(namespace).metadata.resource_version
    batch.create_namespaced_job(
        namespace, job_body("slow", "import time; time.sleep(60)", activeDeadlineSeconds=1)
    )
    job, history = watch_until_terminal(batch, namespace, "slow")
    assert history[-2:] == [["FailureTarget"], ["FailureTarget", "Failed"]]
    assert conditions(job)[-1] == ("Failed", "True", "DeadlineExceeded")
    assert job.status.conditions[-1].message == "Job was active longer than specified deadline"
    assert job.status.failed == 1 and not job.status.active and job.status.terminating == 0
    events = replay(core.list_namespaced_pod, namespace, since)
    assert any(e["object"].status.phase == "Running" for e in events)  # it was running ...
    assert events[-1]["type"] == "DELETED"  # ... and was stopped and removed
    assert job_pods(core, namespace, "slow") == []


def test_on_failure_restarts_in_place_until_backoff_limit(batch: Any, core: Any, namespace: str) -> None:
    since = core.list_namespaced_pod(namespace).metadata.resource_version
    batch.create_namespaced_job(
        namespace, job_body("crash", "import sys; sys.exit(1)", restart="OnFailure", backoffLimit=2)
    )
    job, _ = watch_until_terminal(batch, namespace, "crash")
    assert conditions(job)[-1] == ("Failed", "True", "BackoffLimitExceeded")
    assert job.status.failed == 1
    pod_states = [e["object"] for e in replay(core.list_namespaced_pod, namespace, since)]
    assert len({p.metadata.uid for p in pod_states}) == 1  # one pod, restarted in place
    restarts = [cs.restart_count for p in pod_states for cs in p.status.container_statuses or []]
    assert max(restarts) >= 2


def test_completions_with_parallelism(batch: Any, core: Any, namespace: str) -> None:
    batch.create_namespaced_job(
        namespace, job_body("par", "import time; time.sleep(0.3)", completions=3, parallelism=2)
    )
    peak = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = batch.read_namespaced_job("par", namespace)
        peak = max(peak, job.status.active or 0)
        if any(c.type == "Complete" for c in job.status.conditions or []):
            break
        time.sleep(0.05)
    assert peak == 2
    assert job.status.succeeded == 3
    assert [p.status.phase for p in job_pods(core, namespace, "par")] == ["Succeeded"] * 3


def test_suspend_then_resume(batch: Any, core: Any, namespace: str) -> None:
    batch.create_namespaced_job(namespace, job_body("sus", "print('ok')", suspend=True))
    job = wait_for(lambda: (j := batch.read_namespaced_job("sus", namespace)).status.conditions and j)
    assert conditions(job) == [("Suspended", "True", "JobSuspended")]
    assert job.status.conditions[0].message == "Job suspended"
    assert job.status.start_time is None and job_pods(core, namespace, "sus") == []
    batch.patch_namespaced_job("sus", namespace, {"spec": {"suspend": False}})
    job, _ = watch_until_terminal(batch, namespace, "sus")
    assert ("Suspended", "False", "JobResumed") in conditions(job)
    assert job.status.start_time is not None and job.status.succeeded == 1
    assert ("Normal", "Resumed", "Job resumed") in events_of(core, namespace, "sus")


def test_ttl_after_finished_deletes_job_and_pods(batch: Any, core: Any, namespace: str) -> None:
    from kubernetes.client import ApiException

    batch.create_namespaced_job(namespace, job_body("ttl", "print('bye')", ttlSecondsAfterFinished=0))

    def gone() -> bool:
        try:
            batch.read_namespaced_job("ttl", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone)
    assert job_pods(core, namespace, "ttl") == []


def test_delete_without_policy_orphans_pods(batch: Any, core: Any, namespace: str) -> None:
    batch.create_namespaced_job(namespace, job_body("orph", "import time; time.sleep(30)"))
    wait_for(lambda: job_pods(core, namespace, "orph"))
    batch.delete_namespaced_job("orph", namespace)  # batch/v1 default: Orphan
    assert "orph" not in [j.metadata.name for j in batch.list_namespaced_job(namespace).items]
    [pod] = job_pods(core, namespace, "orph")
    assert pod.metadata.owner_references is None and pod.metadata.deletion_timestamp is None
    wait_for(lambda: not job_pods(core, namespace, "orph")[0].metadata.finalizers)


def deleted_versions(list_fn: Callable[..., Any], namespace: str, since: str) -> dict[str, int]:
    """name -> resourceVersion of its DELETED event, replayed from the watch history after ``since``."""
    return {
        e["object"].metadata.name: int(e["object"].metadata.resource_version)
        for e in replay(list_fn, namespace, since)
        if e["type"] == "DELETED"
    }


def test_delete_foreground_removes_pods_before_the_job(batch: Any, core: Any, namespace: str) -> None:
    batch.create_namespaced_job(namespace, job_body("fg", "import time; time.sleep(30)", parallelism=2))
    wait_for(lambda: len(job_pods(core, namespace, "fg")) == 2)
    before = core.list_namespaced_pod(namespace).metadata.resource_version
    response = batch.delete_namespaced_job(
        "fg", namespace, propagation_policy="Foreground", _preload_content=False
    )
    held = json.loads(response.data)
    assert held["kind"] == "Job" and held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    wait_for(lambda: not batch.list_namespaced_job(namespace).items)
    assert job_pods(core, namespace, "fg") == []
    pods_gone = deleted_versions(core.list_namespaced_pod, namespace, before)
    job_gone = deleted_versions(batch.list_namespaced_job, namespace, before)
    assert len(pods_gone) == 2 and max(pods_gone.values()) < job_gone["fg"]


def test_pod_failure_policy_fail_job_on_exit_code(batch: Any, core: Any, namespace: str) -> None:
    policy = {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
        ]
    }
    batch.create_namespaced_job(
        namespace, job_body("pfp", "import sys; sys.exit(42)", podFailurePolicy=policy)
    )
    job, history = watch_until_terminal(batch, namespace, "pfp")
    [pod] = job_pods(core, namespace, "pfp")
    message = (
        f"Container main for pod {namespace}/{pod.metadata.name} failed with exit code 42 "
        "matching FailJob rule at index 0"
    )
    assert history[-1] == ["FailureTarget", "Failed"]
    assert [(c.type, c.reason, c.message) for c in job.status.conditions] == [
        ("FailureTarget", "PodFailurePolicy", message),
        ("Failed", "PodFailurePolicy", message),
    ]
    assert job.status.failed == 1


def test_indexed_job_gives_each_pod_its_index(batch: Any, core: Any, namespace: str) -> None:
    code = "import os; print('index=' + os.environ['JOB_COMPLETION_INDEX'])"
    batch.create_namespaced_job(
        namespace, job_body("idx", code, completionMode="Indexed", completions=3, parallelism=3)
    )
    job, _ = watch_until_terminal(batch, namespace, "idx")
    assert conditions(job)[-1][0] == "Complete"
    assert job.status.completed_indexes == "0-2" and job.status.succeeded == 3
    for pod in job_pods(core, namespace, "idx"):
        index = pod.metadata.annotations["batch.kubernetes.io/job-completion-index"]
        assert pod.metadata.labels["batch.kubernetes.io/job-completion-index"] == index
        assert pod.metadata.name.startswith(f"idx-{index}-")
        log = core.read_namespaced_pod_log(pod.metadata.name, namespace, _preload_content=False).data
        assert log.decode().strip() == f"index={index}"


def test_invalid_jobs_get_upstream_422(batch: Any, namespace: str) -> None:
    from kubernetes.client import ApiException

    body = job_body("bad", "print(1)")
    del body["spec"]["template"]["spec"]["restartPolicy"]
    with pytest.raises(ApiException) as info:
        batch.create_namespaced_job(namespace, body)
    status = json.loads(info.value.body)
    assert (info.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'Job.batch "bad" is invalid: spec.template.spec.restartPolicy: Unsupported '
        'value: "Always": supported values: "OnFailure", "Never"'
    )

    batch.create_namespaced_job(namespace, job_body("imm", "import time; time.sleep(5)"))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "other"}]}}}}
    with pytest.raises(ApiException) as info:
        batch.patch_namespaced_job("imm", namespace, patch)
    message = json.loads(info.value.body)["message"]
    assert message.startswith('Job.batch "imm" is invalid: spec.template: Invalid value: ')
    assert message.endswith("field is immutable")
