"""Deployment status counters and the Available/Progressing conditions (syncRolloutStatus rules)."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.deployment import status as st
from airflow_k8s_ml.testbed.local_cluster.meta import rfc3339

NOW = 1_700_000_000.0


def deployment(
    replicas: int = 2, generation: int = 1, status: dict[str, Any] | None = None, deadline: int = 600
) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "generation": generation},
        "spec": {
            "replicas": replicas,
            "progressDeadlineSeconds": deadline,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
        },
        "status": status or {},
    }


def rs(name: str, replicas: int, ready: int = 0, available: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": available},
    }


def test_counters_omit_zeroes_and_available_condition() -> None:
    new = rs("web-new", 2)
    status = st.calculate_status([new], new, deployment(), NOW)
    assert status == {
        "observedGeneration": 1,
        "replicas": 2,
        "updatedReplicas": 2,
        "unavailableReplicas": 2,
        "conditions": [
            {
                "type": "Available",
                "status": "False",
                "lastUpdateTime": rfc3339(NOW),
                "lastTransitionTime": rfc3339(NOW),
                "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability.",
            }
        ],
    }
    ready = rs("web-new", 2, ready=2, available=2)
    assert st.get_condition(st.calculate_status([ready], ready, deployment(), NOW), "Available")[
        "reason"
    ] == ("MinimumReplicasAvailable")


def test_complete_rollout_reports_new_replica_set_available() -> None:
    new = rs("web-new", 2, ready=2, available=2)
    progressing = st.new_condition("Progressing", "True", "ReplicaSetUpdated", "...", NOW - 30)
    status = st.rollout_status([new], new, deployment(status={"conditions": [progressing]}), NOW)
    condition = st.get_condition(status, "Progressing")
    assert (condition["reason"], condition["message"]) == (
        "NewReplicaSetAvailable",
        'ReplicaSet "web-new" has successfully progressed.',
    )
    assert condition["lastTransitionTime"] == rfc3339(NOW - 30)  # same status: transition time kept


def test_progress_refreshes_last_update_time_only() -> None:
    old_status = {
        "replicas": 3,
        "updatedReplicas": 1,
        "conditions": [
            st.new_condition(
                "Progressing", "True", "ReplicaSetUpdated", 'ReplicaSet "web-new" is progressing.', NOW - 100
            )
        ],
    }
    new, old = rs("web-new", 2, ready=1), rs("web-old", 1, ready=1, available=1)
    status = st.rollout_status([old, new], new, deployment(status=old_status), NOW)
    condition = st.get_condition(status, "Progressing")
    assert condition["reason"] == "ReplicaSetUpdated"
    assert condition["lastUpdateTime"] == rfc3339(NOW) and condition["lastTransitionTime"] == rfc3339(
        NOW - 100
    )


def test_no_progress_past_the_deadline_times_out() -> None:
    stalled = {
        "replicas": 3,
        "updatedReplicas": 1,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "conditions": [st.new_condition("Progressing", "True", "ReplicaSetUpdated", "x", NOW - 11)],
    }
    new, old = rs("web-new", 1), rs("web-old", 2, ready=2, available=2)
    d = deployment(status=stalled, deadline=10)
    status = st.rollout_status([old, new], new, d, NOW)
    condition = st.get_condition(status, "Progressing")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "ProgressDeadlineExceeded",
        'ReplicaSet "web-new" has timed out progressing.',
    )
    assert (
        st.get_condition(
            st.rollout_status([old, new], new, deployment(status=stalled, deadline=20), NOW), "Progressing"
        )["reason"]
        == "ReplicaSetUpdated"
    )


def test_paused_and_resumed_conditions() -> None:
    paused = deployment()
    paused["spec"]["paused"] = True
    condition = st.paused_condition(paused, NOW)
    assert condition is not None and (condition["status"], condition["reason"]) == (
        "Unknown",
        "DeploymentPaused",
    )
    resumed = deployment(status={"conditions": [condition]})
    assert st.paused_condition(resumed, NOW)["reason"] == "DeploymentResumed"


def test_replica_failure_is_copied_from_the_new_replica_set() -> None:
    new = rs("web-new", 1)
    new["status"]["conditions"] = [
        {
            "type": "ReplicaFailure",
            "status": "True",
            "lastTransitionTime": rfc3339(NOW),
            "reason": "FailedCreate",
            "message": "quota",
        }
    ]
    status = st.rollout_status([new], new, deployment(replicas=1), NOW)
    assert st.get_condition(status, "ReplicaFailure")["reason"] == "FailedCreate"
