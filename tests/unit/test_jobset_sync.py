"""JobSet decisions (kubernetes-sigs/jobset jobset_controller.go, success_policy.go, failure_policy.go):
child Jobs, their keys, success and failure policies, restarts, suspension and conditions."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.jobset.admission import set_defaults
from airflow_k8s_ml.testbed.local_cluster.controllers.jobset.conditions import set_condition
from airflow_k8s_ml.testbed.local_cluster.controllers.jobset.jobs import desired_jobs, headless_service
from airflow_k8s_ml.testbed.local_cluster.controllers.jobset.sync import classify, decide
from airflow_k8s_ml.testbed.local_cluster.meta import parse_time

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def jobset(*rjobs: tuple[str, int], **spec: Any) -> Obj:
    js: Obj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns", "uid": "u1"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": name,
                    "replicas": replicas,
                    "template": {
                        "metadata": {"labels": {"step": name}},
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {"spec": {"containers": []}},
                        },
                    },
                }
                for name, replicas in rjobs
            ],
            **spec,
        },
    }
    set_defaults(js)
    return js


def child(
    js: Obj, name: str, state: str | None = None, at: str = "2026-01-01T00:00:00Z", **status: Any
) -> Obj:
    job = next(j for j in desired_jobs(js) if j["metadata"]["name"] == name)
    conditions = []
    if state is not None:
        conditions.append(
            {
                "type": state,
                "status": "True",
                "reason": status.pop("reason", "X"),
                "message": "m",
                "lastTransitionTime": at,
            }
        )
    job["status"] = {"conditions": conditions, **status}
    return job


def test_child_jobs_carry_jobset_keys_and_dns_subdomain() -> None:
    js = jobset(("init", 1), ("node", 2))
    jobs = desired_jobs(js)
    assert [j["metadata"]["name"] for j in jobs] == ["js-init-0", "js-node-0", "js-node-1"]
    node1 = jobs[2]
    labels = node1["metadata"]["labels"]
    assert labels["step"] == "node"
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "js"
    assert labels["jobset.sigs.k8s.io/jobset-uid"] == "u1"
    assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert labels["jobset.sigs.k8s.io/replicatedjob-replicas"] == "2"
    assert labels["jobset.sigs.k8s.io/global-replicas"] == "3"
    assert labels["jobset.sigs.k8s.io/job-index"] == "1"
    assert labels["jobset.sigs.k8s.io/job-global-index"] == "2"
    assert labels["jobset.sigs.k8s.io/job-group-index"] == "2"
    assert labels["jobset.sigs.k8s.io/group-name"] == "default"
    assert labels["jobset.sigs.k8s.io/restart-attempt"] == "0"
    assert len(labels["jobset.sigs.k8s.io/job-key"]) == 40
    pod = node1["spec"]["template"]
    assert pod["metadata"]["annotations"]["jobset.sigs.k8s.io/job-index"] == "1"
    assert pod["spec"]["subdomain"] == "js"
    assert node1["spec"]["completionMode"] == "Indexed"
    assert node1["spec"]["suspend"] is False
    assert node1["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    service = headless_service(js)
    assert service["metadata"]["name"] == "js"
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": {"jobset.sigs.k8s.io/jobset-name": "js"},
        "publishNotReadyAddresses": True,
    }


def test_defaults_as_the_webhook_sets_them() -> None:
    js = jobset(("node", 1))
    spec = js["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    pod = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"


def test_first_reconcile_creates_jobs_and_service_without_conditions() -> None:
    decision = decide(jobset(("node", 2)), [], NOW)
    assert [j["metadata"]["name"] for j in decision.create] == ["js-node-0", "js-node-1"]
    assert decision.service is True
    assert decision.status["restarts"] == 0
    assert "conditions" not in decision.status or decision.status["conditions"] == []
    assert decision.status["replicatedJobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    ]


def test_all_success_policy_needs_every_job() -> None:
    js = jobset(("node", 2))
    one = decide(js, [child(js, "js-node-0", "Complete"), child(js, "js-node-1", active=2, ready=2)], NOW)
    assert "terminalState" not in one.status
    assert one.status["replicatedJobsStatus"][0]["ready"] == 1
    both = decide(js, [child(js, "js-node-0", "Complete"), child(js, "js-node-1", "Complete")], NOW)
    assert both.status["terminalState"] == "Completed"
    completed = next(c for c in both.status["conditions"] if c["type"] == "Completed")
    assert (completed["reason"], completed["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    assert ("Normal", "AllJobsCompleted", "jobset completed successfully") in both.events


def test_any_success_policy_with_target() -> None:
    js = jobset(
        ("driver", 1), ("worker", 2), successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]}
    )
    worker_done = decide(js, [child(js, "js-worker-0", "Complete")], NOW)
    assert "terminalState" not in worker_done.status
    driver_done = decide(js, [child(js, "js-driver-0", "Complete")], NOW)
    assert driver_done.status["terminalState"] == "Completed"


def test_no_failure_policy_fails_at_the_first_failed_job() -> None:
    js = jobset(("node", 2))
    jobs = [
        child(js, "js-node-0", "Failed", at="2026-01-01T00:00:05Z"),
        child(js, "js-node-1", "Failed", at="2026-01-01T00:00:01Z"),
    ]
    decision = decide(js, jobs, NOW)
    failed = next(c for c in decision.status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: js-node-1)",
    )
    assert decision.status["terminalState"] == "Failed"
    assert decision.create == []


def test_max_restarts_recreates_then_fails() -> None:
    js = jobset(("node", 1), failurePolicy={"maxRestarts": 1})
    first = decide(js, [child(js, "js-node-0", "Failed")], NOW)
    assert first.status["restarts"] == 1
    assert first.status["restartsCountTowardsMax"] == 1
    restarting = next(c for c in first.status["conditions"] if c["type"] == "RestartingJobSet")
    assert (restarting["status"], restarting["reason"]) == ("True", "DefaultFailurePolicy")
    assert (
        restarting["message"] == "applying RestartJobSet failure policy action (first failed job: js-node-0)"
    )
    assert "terminalState" not in first.status

    js["status"] = first.status
    old = child({**js, "status": {"restarts": 0}}, "js-node-0", "Failed")
    recreating = decide(js, [old], NOW)
    assert recreating.delete == ["js-node-0"]
    assert recreating.create == []  # the old Job must be gone first (same name)
    fresh = decide(js, [], NOW)
    assert fresh.create[0]["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"

    again = decide(js, [child(js, "js-node-0", "Failed")], NOW)
    failed = next(c for c in again.status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == (
        "ReachedMaxRestarts",
        "jobset failed due to reaching max number of restarts (first failed job: js-node-0)",
    )
    restarting = next(c for c in again.status["conditions"] if c["type"] == "RestartingJobSet")
    assert (restarting["status"], restarting["reason"]) == ("False", "JobSetFailed")


def test_fail_jobset_rule_matches_reason_and_target() -> None:
    rules = [
        {"name": "deadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
        {"name": "other", "action": "RestartJobSet", "targetReplicatedJobs": ["node"]},
    ]
    js = jobset(("node", 1), failurePolicy={"maxRestarts": 5, "rules": rules})
    by_deadline = decide(js, [child(js, "js-node-0", "Failed", reason="DeadlineExceeded")], NOW)
    failed = next(c for c in by_deadline.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailJobSetFailurePolicyAction"
    by_backoff = decide(js, [child(js, "js-node-0", "Failed", reason="BackoffLimitExceeded")], NOW)
    restarting = next(c for c in by_backoff.status["conditions"] if c["type"] == "RestartingJobSet")
    assert restarting["reason"] == "FailurePolicy_other"


def test_jobs_of_an_older_attempt_are_previous() -> None:
    js = jobset(("node", 1))
    job = child(js, "js-node-0")
    js["status"] = {"restarts": 2}
    assert classify(js, [job]).previous == [job]


def test_suspend_and_resume() -> None:
    js = jobset(("node", 1), suspend=True)
    created = decide(js, [], NOW)
    assert created.create[0]["spec"]["suspend"] is True
    suspended = next(c for c in created.status["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "True",
        "SuspendedJobs",
        "jobset is suspended",
    )
    running = child(js, "js-node-0")
    running["spec"]["suspend"] = False
    assert decide(js, [running], NOW).suspend == ["js-node-0"]

    js["spec"]["suspend"] = False
    js["status"] = created.status
    held = child(js, "js-node-0")
    held["spec"]["suspend"] = True
    resumed = decide(js, [held], NOW)
    assert resumed.resume == ["js-node-0"]
    suspended = next(c for c in resumed.status["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("False", "ResumeJobs")


def test_finished_jobset_deletes_active_jobs_only() -> None:
    js = jobset(("node", 2))
    js["status"] = {"conditions": [{"type": "Completed", "status": "True"}], "restarts": 0}
    decision = decide(js, [child(js, "js-node-0", "Complete"), child(js, "js-node-1", active=1)], NOW)
    assert decision.delete == ["js-node-1"]
    assert decision.create == []


def test_condition_rule_adds_only_true_and_keeps_transition_time() -> None:
    status: Obj = {}
    events: list[tuple[str, str, str]] = []
    assert not set_condition(status, "Suspended", "False", ("ResumeJobs", "jobset is resumed"), NOW, events)
    assert status["conditions"] == [] and events == []
    set_condition(status, "Suspended", "True", ("SuspendedJobs", "jobset is suspended"), NOW, events)
    first = status["conditions"][0]["lastTransitionTime"]
    set_condition(status, "Suspended", "True", ("Other", "why"), NOW + 60, events)
    assert status["conditions"][0]["lastTransitionTime"] == first
    assert status["conditions"][0]["reason"] == "Other"
    assert len(events) == 2


def test_depends_on_starts_a_replicated_job_after_its_dependency() -> None:
    js = jobset(("init", 1), ("node", 1))
    js["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "init", "status": "Complete"}]
    first = decide(js, [], NOW)
    assert [j["metadata"]["name"] for j in first.create] == ["js-init-0"]
    running = decide(js, [child(js, "js-init-0", active=1)], NOW)
    assert running.create == []
    done = decide(js, [child(js, "js-init-0", "Complete")], NOW)
    assert [j["metadata"]["name"] for j in done.create] == ["js-node-0"]
    js["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "init", "status": "Ready"}]
    ready = decide(js, [child(js, "js-init-0", active=2, ready=2)], NOW)
    assert [j["metadata"]["name"] for j in ready.create] == ["js-node-0"]


def test_ttl_after_finished_expires_from_the_terminal_condition() -> None:
    js = jobset(("node", 1), ttlSecondsAfterFinished=30)
    js["status"] = {
        "restarts": 0,
        "conditions": [{"type": "Completed", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }
    finished = parse_time("2026-01-01T00:00:00Z")
    assert decide(js, [], finished + 29).expired is False
    assert decide(js, [], finished + 30).expired is True
    del js["spec"]["ttlSecondsAfterFinished"]
    assert decide(js, [], finished + 3600).expired is False


def test_in_order_startup_starts_one_replicated_job_at_a_time() -> None:
    js = jobset(("driver", 1), ("workers", 2), startupPolicy={"startupPolicyOrder": "InOrder"})
    first = decide(js, [], NOW)
    assert [j["metadata"]["name"] for j in first.create] == ["js-driver-0"]
    progress = next(c for c in first.status["conditions"] if c["type"] == "StartupPolicyInProgress")
    assert (progress["reason"], progress["message"]) == (
        "InOrderStartupPolicyInProgress",
        "in order startup policy is in progress",
    )
    js["status"] = first.status
    started = decide(js, [child(js, "js-driver-0", active=2, ready=2)], NOW)
    assert [j["metadata"]["name"] for j in started.create] == ["js-workers-0", "js-workers-1"]
    js["status"] = started.status
    ready = [child(js, "js-driver-0", active=2, ready=2)] + [
        child(js, f"js-workers-{i}", active=2, ready=2) for i in range(2)
    ]
    done = decide(js, ready, NOW)
    assert done.create == []
    types = {c["type"]: c["status"] for c in done.status["conditions"]}
    assert types["StartupPolicyCompleted"] == "True"
    assert types["StartupPolicyInProgress"] == "False"  # the pair exclude each other


def test_resume_brings_scheduling_changes_to_the_job() -> None:
    from airflow_k8s_ml.testbed.local_cluster.controllers.jobset.jobs import resumed_pod_template

    js = jobset(("node", 1))
    rjob = js["spec"]["replicatedJobs"][0]
    pod = rjob["template"]["spec"]["template"]
    pod["metadata"] = {"labels": {"queue": "a"}}
    pod["spec"]["nodeSelector"] = {"zone": "z1"}
    pod["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    job_template = {
        "metadata": {"labels": {"job-name": "x"}},
        "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
    }
    merged = resumed_pod_template(job_template, rjob)
    assert merged["metadata"]["labels"] == {"job-name": "x", "queue": "a"}
    assert merged["spec"]["nodeSelector"] == {"zone": "z1"}
    assert merged["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
