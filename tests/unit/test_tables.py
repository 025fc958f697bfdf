"""Server-side Table rendering (what `kubectl get` prints) for the kinds with their own columns."""

from __future__ import annotations

from airflow_k8s_ml.local_cluster.tables import human_duration, to_table


def _names(table: dict) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"]]


def test_job_columns_follow_kubectl() -> None:
    job = {"metadata": {"name": "pi", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"completions": 1},
           "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}
    table = to_table([job], "Job", "7")
    assert _names(table) == ["Name", "Status", "Completions", "Duration", "Age"]
    assert table["rows"][0]["cells"][:3] == ["pi", "Complete", "1/1"]
    assert table["metadata"]["resourceVersion"] == "7"


def test_hpa_and_replicaset_columns() -> None:
    hpa = {"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                                               "minReplicas": 2, "maxReplicas": 5},
           "status": {"currentReplicas": 3}}
    assert to_table([hpa], "HorizontalPodAutoscaler", "1")["rows"][0]["cells"][:5] == [
        "h", "Deployment/web", 2, 5, 3]
    rs = {"metadata": {"name": "web-5d9"}, "spec": {"replicas": 2},
          "status": {"replicas": 2, "readyReplicas": 1}}
    assert to_table([rs], "ReplicaSet", "1")["rows"][0]["cells"][:4] == ["web-5d9", 2, 2, 1]


def test_human_duration_matches_kubectl_buckets() -> None:
    cases = {5: "5s", 119: "119s", 130: "2m10s", 600: "10m", 3600: "60m", 3 * 3600 + 120: "3h2m",
             30 * 3600: "30h", 55 * 3600: "2d7h", 48 * 3600: "2d", 30 * 86400: "30d", 900 * 86400: "2y170d"}
    assert {s: human_duration(s) for s in cases} == cases
