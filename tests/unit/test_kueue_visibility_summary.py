"""The local cluster's Kueue visibility API, pure part (controllers/kueue/visibility.py): which workloads are
pending in a ClusterQueue, in the order the scheduler admits in, and the two summaries' positions, offset and
limit as upstream's pendingWorkloadsInCqREST / pendingWorkloadsInLqREST count them."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.kueue.visibility import (
    cluster_queue_summary,
    local_queue_summary,
    pending_workloads,
)

Obj = dict[str, Any]


def _lq(namespace: str, name: str, cq: str) -> Obj:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": cq}}


def _wl(
    name: str, queue: str, created: str, *, namespace: str = "ml", priority: int = 0, **status: Any
) -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": created,
            "uid": f"uid-{name}",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": f"job-{name}",
                    "controller": True,
                }
            ],
        },
        "spec": {"queueName": queue, "priority": priority},
        "status": status,
    }


RESERVED = {
    "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
    "admission": {"clusterQueue": "cq"},
}
FINISHED = {"conditions": [{"type": "Finished", "status": "True"}]}
QUEUES = [_lq("ml", "a", "cq"), _lq("ml", "b", "cq"), _lq("other", "a", "cq"), _lq("ml", "elsewhere", "cq2")]
WORKLOADS = [
    _wl("running", "a", "2026-12-02T08:00:00Z", **RESERVED),
    _wl("done", "a", "2026-12-02T08:00:00Z", **FINISHED),
    _wl("old", "a", "2026-12-02T08:00:01Z"),
    _wl("urgent", "b", "2026-12-02T08:00:05Z", priority=100),
    _wl("tie-b", "a", "2026-12-02T08:00:02Z"),
    _wl("tie-a", "b", "2026-12-02T08:00:02Z"),
    _wl("theirs", "a", "2026-12-02T08:00:03Z", namespace="other"),
    _wl("not-ours", "elsewhere", "2026-12-02T08:00:00Z"),
    _wl("no-queue", "missing", "2026-12-02T08:00:00Z"),
]


def _names(summary: Obj) -> list[str]:
    return [i["metadata"]["name"] for i in summary["items"]]


def test_pending_is_unreserved_live_and_in_admission_order() -> None:
    pending = pending_workloads("cq", QUEUES, WORKLOADS)
    # priority first, then creation, then the name (ties within a second)
    assert [w["metadata"]["name"] for w in pending] == ["urgent", "old", "tie-a", "tie-b", "theirs"]


def test_cluster_queue_summary_counts_each_local_queue_and_pages() -> None:
    pending = pending_workloads("cq", QUEUES, WORKLOADS)
    whole = cluster_queue_summary(pending, 0, 1000)
    assert whole["kind"] == "PendingWorkloadsSummary" and whole["metadata"] == {"creationTimestamp": None}
    rows = [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in whole["items"]
    ]
    assert rows == [("urgent", 0, 0), ("old", 1, 0), ("tie-a", 2, 1), ("tie-b", 3, 1), ("theirs", 4, 0)]
    paged = cluster_queue_summary(pending, 2, 2)
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in paged["items"]] == [
        (2, 1),
        (3, 1),
    ]
    item = whole["items"][0]
    assert item["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "urgent", "uid": "job-urgent"}
    ]
    assert (item["priority"], item["localQueueName"]) == (100, "b")


def test_local_queue_summary_lists_its_own_and_skips_offset_of_them() -> None:
    pending = pending_workloads("cq", QUEUES, WORKLOADS)
    mine = local_queue_summary(pending, "ml", "a", 0, 1000)
    assert _names(mine) == ["old", "tie-b"]
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in mine["items"]] == [
        (1, 0),
        (3, 1),
    ]
    later = local_queue_summary(pending, "ml", "a", 1, 1)
    assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in later["items"]] == [("tie-b", 1)]
    assert _names(local_queue_summary(pending, "ml", "a", 0, 1)) == ["old"]
