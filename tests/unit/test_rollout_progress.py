"""The rollout progress lines the Deployment wait logs (status/rollout_progress.py)."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.status.rollout_progress import progress_line


def deployment(generation: int = 2, observed: int = 2, **status: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "digits",
            "generation": generation,
            "annotations": {"deployment.kubernetes.io/revision": "2"},
        },
        "spec": {"replicas": 2},
        "status": {"observedGeneration": observed, **status},
    }


def test_one_line_per_change_of_the_counts_ending_with_kubectls_message():
    steps = [
        deployment(generation=2, observed=1, replicas=2, updatedReplicas=0, readyReplicas=2),
        deployment(replicas=3, updatedReplicas=1, readyReplicas=2, availableReplicas=2),
        deployment(replicas=3, updatedReplicas=1, readyReplicas=2, availableReplicas=2),  # a pod event
        deployment(replicas=3, updatedReplicas=2, readyReplicas=3, availableReplicas=3),
        deployment(replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2),
    ]
    lines, last = [], None
    for step in steps:
        last, line = progress_line(step, last)
        if line is not None:
            lines.append(line)
    assert lines == [
        # not observed yet: the counts are the previous spec's, so they are left out
        "rollout revision 2: Waiting for deployment spec update to be observed...",
        "rollout revision 2: 1/2 updated, 2 ready, 2 available, 2 old - "
        'Waiting for deployment "digits" rollout to finish: 1 out of 2 new replicas have been updated...',
        "rollout revision 2: 2/2 updated, 3 ready, 3 available, 1 old - "
        'Waiting for deployment "digits" rollout to finish: 1 old replicas are pending termination...',
        'rollout revision 2: 2/2 updated, 2 ready, 2 available - deployment "digits" successfully rolled out',
    ]


def test_a_deployment_without_status_yet_still_gives_a_line():
    progress, line = progress_line({"metadata": {"name": "d", "generation": 1}, "spec": {}}, None)
    assert progress.wanted is None and progress.total == 0
    assert line == "rollout new revision: Waiting for deployment spec update to be observed..."
    observed = {"metadata": {"name": "d", "generation": 1}, "spec": {}, "status": {"observedGeneration": 1}}
    assert progress_line(observed, progress)[1] == (
        'rollout new revision: 0/? updated, 0 ready, 0 available - deployment "d" successfully rolled out'
    )
