"""Kueue's pure decisions on the local cluster: flavor assignment and its messages, the scheduling pass
(admission, StrictFIFO, preemption), Workload names and pod sets, and the `--gpu-quota` plumbing."""

from __future__ import annotations

import argparse
from decimal import Decimal
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.__main__ import add_serve_arguments, options_from
from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.defaults import default_objects
from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.integrations import (
    JOB,
    PYTORCHJOB,
    finished,
    pod_sets,
)
from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.quota import assign_flavors, quantity_string
from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.scheduling import schedule
from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.webhook import (
    default_cluster_queue,
    validate_local_queue,
)
from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.workloads import workload_name
from airflow_k8s_ml.testbed.local_cluster.errors import StatusError
from airflow_k8s_ml.testbed.local_cluster.schema import schema_for, unknown_fields

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
NOW = 1_700_000_000.0


def cq(gpus: int, cpu: str = "8", **spec: Any) -> Obj:
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": GPU, "nominalQuota": gpus}]
    return {
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": ["cpu", GPU], "flavors": [{"name": "f", "resources": resources}]}
            ],
            **spec,
        },
    }


def pod(gpus: int = 1, cpu: str | None = None) -> Obj:
    limits: Obj = {GPU: str(gpus)} if gpus else {}
    requests: Obj = {"cpu": cpu} if cpu else {}
    return {"spec": {"containers": [{"name": "c", "resources": {"limits": limits, "requests": requests}}]}}


def wl(
    name: str, *pod_sets: tuple[str, int, Obj], priority: int = 0, created: str = "2026-01-01T00:00:00Z"
) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": {
            "queueName": "lq",
            "priority": priority,
            "podSets": [{"name": n, "count": c, "template": t} for n, c, t in pod_sets],
        },
    }


LQ = {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}


def run(queue: Obj, *workloads: Obj) -> Any:
    return schedule([queue], [LQ], list(workloads), {"ns": {}}, {"f"}, NOW)


def cond(status: Obj, type_: str) -> Obj:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_insufficient_unused_quota_names_resource_flavor_and_lack() -> None:
    used = {("f", GPU): Decimal(1)}
    result = assign_flavors(wl("a", ("main", 1, pod(1))), cq(1), used)
    assert result.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor f, "
        "1 more needed"
    )


def test_request_above_nominal_quota_says_maximum_capacity() -> None:
    result = assign_flavors(wl("a", ("main", 3, pod(1))), cq(2), {})
    assert result.message == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor f, "
        "request > maximum capacity (3 > 2)"
    )


def test_uncovered_resource_is_unavailable() -> None:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "1Gi"}}}]}}
    result = assign_flavors(wl("a", ("main", 1, template)), cq(1), {})
    assert (
        result.message
        == "couldn't assign flavors to pod set main: resource memory unavailable in ClusterQueue"
    )


def test_pod_sets_are_assigned_all_or_nothing() -> None:
    gang = wl("g", ("master", 1, pod(1)), ("worker", 2, pod(1)))
    partial = assign_flavors(gang, cq(2), {})
    assert not partial.fits and partial.pod_sets == []
    assert "pod set worker" in partial.message and "1 more needed" in partial.message
    whole = assign_flavors(gang, cq(3), {})
    assert [(p["name"], p["resourceUsage"][GPU], p["flavors"][GPU]) for p in whole.pod_sets] == [
        ("master", "1", "f"),
        ("worker", "2", "f"),
    ]


def test_quantity_strings_as_upstream_prints_them() -> None:
    assert quantity_string("cpu", Decimal("0.5")) == "500m"
    assert quantity_string("memory", Decimal(2 * 1024**3)) == "2Gi"
    assert quantity_string(GPU, Decimal(1)) == "1"


def test_pass_admits_what_fits_and_reports_the_rest() -> None:
    plan = run(
        cq(1), wl("a", ("main", 1, pod())), wl("b", ("main", 1, pod()), created="2026-01-01T00:00:01Z")
    )
    a, b = plan.workloads[("ns", "a")], plan.workloads[("ns", "b")]
    assert a["admission"]["clusterQueue"] == "cq"
    assert cond(a, "QuotaReserved")["message"] == "Quota reserved in ClusterQueue cq"
    assert cond(a, "Admitted")["status"] == "True"
    assert cond(b, "QuotaReserved")["status"] == "False" and cond(b, "QuotaReserved")["reason"] == "Pending"
    assert plan.cluster_queues["cq"]["pendingWorkloads"] == 1
    assert plan.cluster_queues["cq"]["admittedWorkloads"] == 1
    assert plan.local_queues[("ns", "lq")]["pendingWorkloads"] == 1


def test_strict_fifo_blocks_behind_the_head_best_effort_does_not() -> None:
    big = wl("big", ("main", 2, pod()), created="2026-01-01T00:00:00Z")
    small = wl("small", ("main", 1, pod()), created="2026-01-01T00:00:01Z")
    best_effort = run(cq(1, queueingStrategy="BestEffortFIFO"), big, small)
    assert "admission" in best_effort.workloads[("ns", "small")]
    strict = run(cq(1, queueingStrategy="StrictFIFO"), big, small)
    assert ("ns", "small") not in strict.workloads


def test_missing_local_queue_is_inadmissible() -> None:
    orphan = wl("a", ("main", 1, pod()))
    orphan["spec"]["queueName"] = "nope"
    status = run(cq(1), orphan).workloads[("ns", "a")]
    assert cond(status, "QuotaReserved")["reason"] == "Inadmissible"
    assert cond(status, "QuotaReserved")["message"] == "LocalQueue nope doesn't exist"


def _admitted(name: str, priority: int, at: str) -> Obj:
    w = wl(name, ("main", 1, pod()), priority=priority)
    w["status"] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {GPU: "f"}, "resourceUsage": {GPU: "1"}, "count": 1}
            ],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": at,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "",
                "lastTransitionTime": at,
            },
        ],
    }
    return w


def test_lower_priority_preemption_evicts_lowest_then_newest() -> None:
    queue = cq(2, preemption={"withinClusterQueue": "LowerPriority"})
    older = _admitted("older", 10, "2026-01-01T00:00:00Z")
    newer = _admitted("newer", 10, "2026-01-01T00:01:00Z")
    high = wl("high", ("main", 1, pod()), priority=100)
    high["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": "job-high"}
    plan = run(queue, older, newer, high)
    evicted = plan.workloads[("ns", "newer")]
    assert cond(evicted, "Evicted")["reason"] == "Preempted"
    assert cond(evicted, "Evicted")["message"] == (
        "Preempted to accommodate a workload (UID: uid-high, JobUID: job-high) due to prioritization in the "
        "ClusterQueue"
    )
    assert ("ns", "older") not in plan.workloads
    assert cond(plan.workloads[("ns", "high")], "QuotaReserved")["message"].endswith(
        "Pending the preemption of 1 workload(s)"
    )


def test_no_preemption_of_equal_priority_or_when_never() -> None:
    high = wl("high", ("main", 1, pod()), priority=10)
    plan = run(
        cq(1, preemption={"withinClusterQueue": "LowerPriority"}),
        _admitted("low", 10, "2026-01-01T00:00:00Z"),
        high,
    )
    assert ("ns", "low") not in plan.workloads
    high["spec"]["priority"] = 100
    plan = run(
        cq(1, preemption={"withinClusterQueue": "Never"}), _admitted("low", 10, "2026-01-01T00:00:00Z"), high
    )
    assert ("ns", "low") not in plan.workloads


def test_workload_name_and_pod_sets_follow_upstream() -> None:
    job: Obj = {
        "metadata": {"name": "train", "namespace": "ns", "uid": "u1"},
        "spec": {"parallelism": 4, "completions": 2, "template": {"spec": {"containers": []}}},
    }
    name = workload_name(JOB, job)
    assert name.startswith("job-train-") and len(name) == len("job-train-") + 5
    assert workload_name(JOB, {**job, "metadata": {**job["metadata"], "uid": "u2"}}) != name
    assert [(p["name"], p["count"]) for p in pod_sets(JOB, job)] == [("main", 2)]
    ptj = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 3}, "Master": {"replicas": 1}}}}
    assert [(p["name"], p["count"]) for p in pod_sets(PYTORCHJOB, ptj)] == [("master", 1), ("worker", 3)]


def test_gpu_quota_flag_creates_the_default_queue() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    options = options_from(parser.parse_args(["--gpus", "2", "--gpu-quota", "1", "--cpu", "4"]))
    assert options.argv()[options.argv().index("--gpu-quota") + 1] == "1"
    quota = options.settings().queue_quota
    assert quota is not None and quota.gpus == 1 and quota.cpu == "4"
    objects = dict(default_objects(quota))
    resources = objects["clusterqueues"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in resources} == {"cpu": "4", "memory": "32Gi", GPU: "1"}
    assert objects["localqueues"]["spec"]["clusterQueue"] == "cluster-queue"
    assert options_from(parser.parse_args([])).settings().queue_quota is None


def test_finished_reports_success_and_failure_as_upstream() -> None:
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert finished(JOB, done) == (True, "Succeeded", "Job finished successfully")
    failed = {
        "status": {"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}
    }
    assert finished(JOB, failed) == (True, "Failed", "BackoffLimitExceeded")
    assert (
        finished(PYTORCHJOB, {"status": {"conditions": [{"type": "Running", "status": "True"}]}})[0] is False
    )


def test_cluster_queue_enums_and_local_queue_immutability_as_the_crds() -> None:
    with pytest.raises(StatusError) as bad:
        default_cluster_queue({"metadata": {"name": "cq"}, "spec": {"queueingStrategy": "LIFO"}}, None)
    assert bad.value.code == 422
    assert bad.value.message == (
        'ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec.queueingStrategy: Unsupported value: "LIFO": '
        'supported values: "StrictFIFO", "BestEffortFIFO"'
    )
    defaulted = default_cluster_queue({"metadata": {"name": "cq"}}, None)
    assert defaulted["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert defaulted["spec"]["preemption"]["withinClusterQueue"] == "Never"
    old = {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "a"}}
    with pytest.raises(StatusError) as moved:
        validate_local_queue({"metadata": {"name": "lq"}, "spec": {"clusterQueue": "b"}}, old)
    assert 'spec.clusterQueue: Invalid value: "string": field is immutable' in moved.value.message


def test_strict_field_validation_knows_the_kueue_fields() -> None:
    queue = cq(1)
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuotta"] = "1"
    assert unknown_fields(queue, schema_for("kueue.x-k8s.io/v1beta2", "ClusterQueue")) == [
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuotta"
    ]
    workload = wl("a", ("main", 1, pod()))
    assert unknown_fields(workload, schema_for("kueue.x-k8s.io/v1beta2", "Workload")) == []
    priority_class = {"metadata": {"name": "p"}, "value": 10, "descripton": "x"}
    assert unknown_fields(priority_class, schema_for("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass")) == [
        "descripton"
    ]


def test_events_say_pending_once_per_message_and_report_wait_times() -> None:
    first = run(
        cq(1), wl("a", ("main", 1, pod())), wl("b", ("main", 1, pod()), created="2026-01-01T00:00:01Z")
    )
    reasons = [(key[1], reason) for key, _, reason, _ in first.events]
    assert reasons == [("a", "QuotaReserved"), ("a", "Admitted"), ("b", "Pending")]
    waited = first.events[0][3]
    assert waited.startswith("Quota reserved in ClusterQueue cq, wait time since queued was ")
    assert first.events[1][3] == "Admitted by ClusterQueue cq, wait time since reservation was 0s"
    still = wl("b", ("main", 1, pod()))
    still["status"] = first.workloads[("ns", "b")]
    again = run(cq(1), _admitted("a", 0, "2026-01-01T00:00:00Z"), still)
    assert again.events == [] and again.workloads == {}
