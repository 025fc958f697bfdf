from __future__ import annotations

import pytest

from airflow_k8s_ml.status.rollout import classify_deployment, rollout_status


def deployment(
    generation=2,
    observed=2,
    replicas=3,
    status_replicas=3,
    updated=3,
    available=3,
    progressing_reason="NewReplicaSetAvailable",
    revision="2",
):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "llama",
            "generation": generation,
            "annotations": {"deployment.kubernetes.io/revision": revision},
        },
        "spec": {"replicas": replicas},
        "status": {
            "observedGeneration": observed,
            "replicas": status_replicas,
            "updatedReplicas": updated,
            "readyReplicas": available,
            "availableReplicas": available,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {
                    "type": "Progressing",
                    "status": "False" if progressing_reason == "ProgressDeadlineExceeded" else "True",
                    "reason": progressing_reason,
                    "message": 'ReplicaSet "llama-5d8f" has timed out progressing.',
                },
            ],
        },
    }


@pytest.mark.parametrize(
    ("kwargs", "done", "failed", "message"),
    [
        (
            {"generation": 3, "observed": 2},
            False,
            False,
            "Waiting for deployment spec update to be observed...",
        ),
        (
            {"progressing_reason": "ProgressDeadlineExceeded", "updated": 1},
            False,
            True,
            'deployment "llama" exceeded its progress deadline',
        ),
        (
            {"updated": 1, "status_replicas": 4, "progressing_reason": "ReplicaSetUpdated"},
            False,
            False,
            'Waiting for deployment "llama" rollout to finish: 1 out of 3 new replicas have been updated...',
        ),
        (
            {"status_replicas": 4},
            False,
            False,
            'Waiting for deployment "llama" rollout to finish: 1 old replicas are pending termination...',
        ),
        (
            {"available": 1},
            False,
            False,
            'Waiting for deployment "llama" rollout to finish: 1 of 3 updated replicas are available...',
        ),
        ({}, True, False, 'deployment "llama" successfully rolled out'),
        (
            {"replicas": 0, "status_replicas": 0, "updated": 0, "available": 0},
            True,
            False,
            "successfully rolled out",
        ),
    ],
)
def test_rollout_status_matches_kubectl(kwargs, done, failed, message):
    status = rollout_status(deployment(**kwargs))
    assert status.done is done
    assert status.failed is failed
    assert message in status.message


def test_deadline_only_counts_once_generation_observed():
    # kubectl checks generation first: an unobserved spec is "waiting" even if the old condition timed out
    status = rollout_status(
        deployment(generation=3, observed=2, progressing_reason="ProgressDeadlineExceeded")
    )
    assert not status.failed and status.message.startswith("Waiting for deployment spec update")


def test_missing_spec_replicas_skips_that_check():
    dep = deployment(updated=0, status_replicas=0, available=0)
    del dep["spec"]["replicas"]
    assert rollout_status(dep).done


def test_revision_check():
    assert rollout_status(deployment(revision="2"), revision=2).done
    status = rollout_status(deployment(revision="3"), revision=2)
    assert (
        status.failed and status.message == "desired revision (2) is different from the running revision (3)"
    )


def test_empty_status_waits():
    dep = {"metadata": {"name": "x", "generation": 1}, "spec": {"replicas": 1}}
    assert rollout_status(dep).message == "Waiting for deployment spec update to be observed..."


@pytest.mark.parametrize(
    ("kwargs", "phase", "reason"),
    [
        ({}, "succeeded", "RolledOut"),
        ({"progressing_reason": "ProgressDeadlineExceeded"}, "failed", "ProgressDeadlineExceeded"),
        ({"available": 2}, "running", "RollingOut"),
        ({"generation": 3}, "pending", "SpecUpdatePending"),
    ],
)
def test_classify_deployment(kwargs, phase, reason):
    state = classify_deployment(deployment(**kwargs))
    assert (state.phase, state.reason) == (phase, reason)
    assert state.details["revision"] == 2
