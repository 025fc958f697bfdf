"""Kueue v1beta1 <-> v1beta2 conversion (the local cluster's, after upstream's apis/kueue/v1beta1/
*_conversion.go) and the provider's choice of version from the cluster's APIGroup: pure."""

from __future__ import annotations

from airflow_k8s_ml.status.kueue import kueue_version
from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.convert import convert
from airflow_k8s_ml.testbed.local_cluster.resources import lookup

G = "kueue.x-k8s.io"


def _rt(version: str, plural: str):  # type: ignore[no-untyped-def]
    rt = lookup(G, version, plural)
    assert rt is not None
    return rt


def test_cluster_queue_renames_and_deprecated_values() -> None:
    old = {
        "apiVersion": f"{G}/v1beta1",
        "kind": "ClusterQueue",
        "spec": {
            "cohort": "team",
            "admissionChecks": ["a", "b"],
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
        },
        "status": {"pendingWorkloadsStatus": {"head": []}, "pendingWorkloads": 1},
    }
    new = convert(old, _rt("v1beta2", "clusterqueues"))
    assert new["apiVersion"] == f"{G}/v1beta2"
    assert new["spec"] == {
        "cohortName": "team",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "b"}]},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
    }
    assert new["status"] == {"pendingWorkloads": 1}
    assert old["spec"]["cohort"] == "team"  # the input is untouched
    back = convert(new, _rt("v1beta1", "clusterqueues"))
    assert back["spec"]["cohort"] == "team" and "cohortName" not in back["spec"]


def test_local_queue_flavor_usage_rename() -> None:
    old = {"apiVersion": f"{G}/v1beta1", "kind": "LocalQueue", "status": {"flavorUsage": [], "flavors": []}}
    new = convert(old, _rt("v1beta2", "localqueues"))
    assert new["status"] == {"flavorsUsage": []}
    assert convert(new, _rt("v1beta1", "localqueues"))["status"] == {"flavorUsage": []}


def test_workload_priority_class_ref_and_the_execution_time_spelling() -> None:
    old = {
        "apiVersion": f"{G}/v1beta1",
        "kind": "Workload",
        "spec": {"priorityClassSource": "scheduling.k8s.io/priorityclass", "priorityClassName": "p"},
        "status": {"accumulatedPastExexcutionTimeSeconds": 5},
    }
    new = convert(old, _rt("v1beta2", "workloads"))
    assert new["spec"] == {
        "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"}
    }
    assert new["status"] == {"accumulatedPastExecutionTimeSeconds": 5}
    assert convert(new, _rt("v1beta1", "workloads")) == old
    unset = convert(
        {"apiVersion": f"{G}/v1beta1", "kind": "Workload", "spec": {"priorityClassName": "x"}},
        _rt("v1beta2", "workloads"),
    )
    assert unset["spec"] == {}  # no source: upstream sets no ref, and the name has nowhere to go


def test_the_provider_speaks_the_newest_version_served() -> None:
    both = {"versions": [{"groupVersion": f"{G}/v1beta2", "version": "v1beta2"}, {"version": "v1beta1"}]}
    assert kueue_version(both) == "v1beta2"
    assert kueue_version({"versions": [{"version": "v1beta1"}]}) == "v1beta1"
    assert kueue_version(None) == "v1beta2"  # no Kueue: its requests answer 404 whatever the version
