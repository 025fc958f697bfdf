"""After a restart, the pods that were running are what a kubelet reports after a node reboot."""

from __future__ import annotations

from airflow_k8s_ml.testbed.local_cluster.kubelet.status import ContainerState
from airflow_k8s_ml.testbed.local_cluster.node_reboot import after_reboot, resume_states


def _pod(policy: str, phase: str = "Running", state: dict | None = None, restarts: int = 2) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"restartPolicy": policy, "containers": [{"name": "main", "image": "i"}]},
        "status": {
            "phase": phase,
            "podIP": "127.42.0.9",
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "i",
                    "state": state or {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    "lastState": {},
                    "restartCount": restarts,
                    "ready": True,
                    "containerID": "local://abc",
                }
            ],
        },
    }


def test_a_never_pod_that_was_running_fails_with_container_status_unknown() -> None:
    status = after_reboot(_pod("Never"), now=1_800_000_000.0)
    assert status is not None and status["phase"] == "Failed" and "podIP" not in status
    main = status["containerStatuses"][0]
    assert main["state"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert main["state"]["terminated"]["exitCode"] == 137 and main["restartCount"] == 3
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodFailed")


def test_an_always_pod_stays_running_and_its_worker_continues_the_counts() -> None:
    pod = _pod("Always")
    status = after_reboot(pod, now=1_800_000_000.0)
    assert status is not None and status["phase"] == "Running"
    pod["status"] = status
    fresh = [ContainerState("main", "i")]
    resume_states(pod, [], fresh)
    fresh[0].wait("ContainerCreating")  # what the worker does before starting the container again
    rendered = fresh[0].render()
    assert rendered["restartCount"] == 3
    assert rendered["lastState"]["terminated"]["reason"] == "ContainerStatusUnknown"


def test_pods_not_running_are_left_alone() -> None:
    assert after_reboot(_pod("Always", phase="Succeeded"), now=0.0) is None
    assert after_reboot(_pod("Never", state={"waiting": {"reason": "ContainerCreating"}}), now=0.0) is None
