"""Server-side Table rendering (what `kubectl get` prints) for the kinds with their own columns."""

from __future__ import annotations

import time

from airflow_k8s_ml.testbed.local_cluster.tables import human_duration, to_table


def _names(table: dict) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"]]


def _wide(table: dict) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"] if c["priority"] == 1]


def test_job_columns_follow_kubectl() -> None:
    job = {
        "metadata": {"name": "pi", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"completions": 1},
        "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
    }
    table = to_table([job], "Job", "7")
    assert _names(table) == [
        "Name",
        "Status",
        "Completions",
        "Duration",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]
    assert _wide(table) == ["Containers", "Images", "Selector"]
    assert table["rows"][0]["cells"][:3] == ["pi", "Complete", "1/1"]
    assert table["metadata"]["resourceVersion"] == "7"


def test_hpa_and_replicaset_columns() -> None:
    hpa = {
        "metadata": {"name": "h"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 2, "maxReplicas": 5},
        "status": {"currentReplicas": 3},
    }
    assert to_table([hpa], "HorizontalPodAutoscaler", "1")["rows"][0]["cells"][:6] == [
        "h",
        "Deployment/web",
        "<none>",
        "2",
        5,
        3,
    ]
    rs = {
        "metadata": {"name": "web-5d9"},
        "spec": {"replicas": 2},
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    assert to_table([rs], "ReplicaSet", "1")["rows"][0]["cells"][:4] == ["web-5d9", 2, 2, 1]


def test_human_duration_matches_kubectl_buckets() -> None:
    cases = {
        5: "5s",
        119: "119s",
        130: "2m10s",
        600: "10m",
        3600: "60m",
        3 * 3600 + 120: "3h2m",
        30 * 3600: "30h",
        55 * 3600: "2d7h",
        48 * 3600: "2d",
        30 * 86400: "30d",
        900 * 86400: "2y170d",
    }
    assert {s: human_duration(s) for s in cases} == cases


def _ago(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))


def test_pod_columns_restarts_and_wide_cells() -> None:
    pod = {
        "metadata": {"name": "web-1", "creationTimestamp": _ago(600)},
        "spec": {"nodeName": "local", "containers": [{"name": "server"}]},
        "status": {
            "phase": "Running",
            "podIP": "127.120.0.7",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "ready": True,
                    "restartCount": 2,
                    "state": {"running": {}},
                    "lastState": {"terminated": {"exitCode": 1, "finishedAt": _ago(30)}},
                }
            ],
        },
    }
    table = to_table([pod], "Pod", "1")
    assert _names(table) == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert _wide(table) == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    assert table["rows"][0]["cells"] == [
        "web-1",
        "1/1",
        "Running",
        "2 (30s ago)",
        "10m",
        "127.120.0.7",
        "local",
        "<none>",
        "<none>",
    ]


def test_pod_status_names_the_failing_container_state() -> None:
    def pod(state: dict) -> dict:
        return {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending", "containerStatuses": [{"restartCount": 0, "state": state}]},
        }

    cells = [
        to_table([pod(s)], "Pod", "1")["rows"][0]["cells"][2]
        for s in (
            {"waiting": {"reason": "CrashLoopBackOff"}},
            {"terminated": {"exitCode": 3}},
            {"terminated": {"exitCode": 137, "signal": 9}},
            {"terminated": {"exitCode": 0, "reason": "Completed"}},
        )
    ]
    assert cells == ["CrashLoopBackOff", "ExitCode:3", "Signal:9", "Completed"]


def test_service_ports_external_ip_and_selector() -> None:
    svc = {
        "metadata": {"name": "digits"},
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.12",
            "clusterIPs": ["10.96.0.12"],
            "selector": {"b": "2", "a": "1"},
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 9090, "protocol": "UDP"}],
        },
    }
    cells = to_table([svc], "Service", "1")["rows"][0]["cells"]
    assert cells[:5] == ["digits", "NodePort", "10.96.0.12", "<none>", "80:30080/TCP,9090/UDP"]
    assert cells[-1] == "a=1,b=2"


def test_hpa_targets_like_kubectl() -> None:
    hpa = {
        "metadata": {"name": "h"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
                },
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "rps"},
                        "target": {"type": "AverageValue", "averageValue": "10"},
                    },
                },
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "queue"},
                        "target": {"type": "AverageValue", "averageValue": "30"},
                    },
                },
            ],
        },
        "status": {
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}},
            ]
        },
    }
    targets = to_table([hpa], "HorizontalPodAutoscaler", "1")["rows"][0]["cells"][2]
    assert targets == "cpu: 40%/70%, <unknown>/10 + 1 more..."


def test_cronjob_last_schedule_is_an_age_and_selectors_are_formatted() -> None:
    cronjob = {
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "30 2 * * *",
            "jobTemplate": {
                "spec": {
                    "selector": {
                        "matchLabels": {"app": "x"},
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
                    },
                    "template": {"spec": {"containers": [{"name": "main", "image": "py:3"}]}},
                }
            },
        },
        "status": {"lastScheduleTime": _ago(125)},
    }
    cells = to_table([cronjob], "CronJob", "1")["rows"][0]["cells"]
    assert cells[5] == "2m5s"
    assert cells[-3:] == ["main", "py:3", "app=x,tier in (a,b)"]
    assert to_table([{**cronjob, "status": {}}], "CronJob", "1")["rows"][0]["cells"][5] == "<none>"


def test_events_put_the_object_not_the_name_first() -> None:
    event = {
        "metadata": {"name": "pi.17f"},
        "type": "Normal",
        "reason": "SuccessfulCreate",
        "involvedObject": {"kind": "Job", "name": "pi"},
        "message": "Created pod: pi-x",
        "lastTimestamp": _ago(3),
        "firstTimestamp": _ago(3),
        "count": 1,
        "source": {"component": "job-controller"},
    }
    table = to_table([event], "Event", "1")
    shown = [i for i, c in enumerate(table["columnDefinitions"]) if c["priority"] == 0]
    assert [table["columnDefinitions"][i]["name"] for i in shown] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Message",
    ]
    assert [table["rows"][0]["cells"][i] for i in shown] == [
        "3s",
        "Normal",
        "SuccessfulCreate",
        "job/pi",
        "Created pod: pi-x",
    ]
