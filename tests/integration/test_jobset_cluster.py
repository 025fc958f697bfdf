"""JobSets created directly (no TrainJob): restarts under a failure policy, then ReachedMaxRestarts."""

from __future__ import annotations

from kubernetes import client

from ..cluster_fixtures import python_cmd, watch_versions
from .trainjob_helpers import condition, is_true

GROUP, VERSION = "jobset.x-k8s.io", "v1alpha2"


def test_failure_policy_restarts_then_reaches_max_restarts(
    custom: client.CustomObjectsApi, batch: client.BatchV1Api, namespace: str
) -> None:
    container = {"name": "main", "image": "python:3.11", "command": python_cmd("raise SystemExit(2)")}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "JobSet",
        "metadata": {"name": "flaky"},
        "spec": {
            "failurePolicy": {"maxRestarts": 1},
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "backoffLimit": 0,
                            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                        }
                    },
                }
            ],
        },
    }
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "jobsets", body)
    assert created["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"
    assert created["spec"]["network"]["enableDNSHostnames"] is True

    versions = watch_versions(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "jobsets",
        name="flaky",
        until=is_true("Failed"),
        timeout=90,
        since=created["metadata"]["resourceVersion"],
        describe=lambda o: o.get("status"),
    )

    restarted = next(v for v in versions if (v.get("status") or {}).get("restarts") == 1)
    restarting = condition(restarted, "RestartingJobSet")
    assert restarting is not None and restarting["status"] == "True"
    assert restarting["reason"] == "DefaultFailurePolicy"
    assert restarting["message"].startswith(
        "applying RestartJobSet failure policy action (first failed job: flaky-workers-"
    )
    final = versions[-1]
    assert final["status"]["restarts"] == 1
    assert final["status"]["terminalState"] == "Failed"
    failed = condition(final, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"].startswith(
        "jobset failed due to reaching max number of restarts (first failed job: flaky-workers-"
    )
    jobs = batch.list_namespaced_job(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=flaky").items
    # Only Jobs of the second attempt remain (the first attempt's were deleted before being recreated; one
    # of the second may not exist yet if its sibling failed first, as upstream).
    assert jobs
    assert {j.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] for j in jobs} == {"1"}
