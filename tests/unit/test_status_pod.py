from __future__ import annotations

import pytest

from airflow_k8s_ml.status import WorkloadState, deadline_phase
from airflow_k8s_ml.status.pod import (
    pod_phase_kind,
    pod_problem,
    pods_phase_kind,
    pods_problems,
    scheduling_message,
)


def pod(phase="Pending", node=None, conditions=(), containers=(), init=(), reason=None, message=None):
    status = {"phase": phase, "conditions": list(conditions)}
    if containers:
        status["containerStatuses"] = list(containers)
    if init:
        status["initContainerStatuses"] = list(init)
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    spec = {"containers": [{"name": "main", "image": "img"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ft-abcde"},
        "spec": spec,
        "status": status,
    }


UNSCHEDULABLE = pod(
    conditions=[
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
            "lastTransitionTime": "2024-05-01T10:00:00Z",
        }
    ]
)
SCHEDULED = {"type": "PodScheduled", "status": "True"}


def waiting(reason, message=None, **extra):
    state = {"reason": reason}
    if message:
        state["message"] = message
    return {
        "name": "main",
        "ready": False,
        "restartCount": 0,
        "image": "img",
        "state": {"waiting": state},
        **extra,
    }


IMAGE_PULL = pod(
    node="local",
    conditions=[SCHEDULED],
    containers=[waiting("ImagePullBackOff", 'Back-off pulling image "ghcr.io/acme/nope:1"')],
)
CREATING = pod(node="local", conditions=[SCHEDULED], containers=[waiting("ContainerCreating")])
CRASHLOOP = pod(
    phase="Running",
    node="local",
    conditions=[SCHEDULED],
    containers=[
        waiting(
            "CrashLoopBackOff",
            "back-off 40s restarting failed container=main pod=ft-abcde_ml(uid)",
            restartCount=3,
            lastState={
                "terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2024-05-01T10:03:00Z"}
            },
        )
    ],
)
OOM = pod(
    phase="Failed",
    node="local",
    conditions=[SCHEDULED],
    containers=[{"name": "main", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}],
)
EVICTED = pod(
    phase="Failed",
    node="local",
    reason="Evicted",
    message="The node was low on resource: memory.",
    conditions=[SCHEDULED, {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}],
)
INIT_FAILED = pod(
    node="local",
    conditions=[SCHEDULED],
    init=[
        {
            "name": "fetch",
            "state": {"terminated": {"exitCode": 2, "reason": "Error", "message": "no such bucket"}},
        }
    ],
    containers=[waiting("PodInitializing")],
)
RUNNING = pod(
    phase="Running",
    node="local",
    conditions=[SCHEDULED],
    containers=[{"name": "main", "state": {"running": {}}}],
)
SUCCEEDED = pod(
    phase="Succeeded",
    node="local",
    containers=[{"name": "main", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
)
CONFIG_ERROR = pod(
    node="local",
    conditions=[SCHEDULED],
    containers=[waiting("CreateContainerConfigError", 'secret "hf-token" not found')],
)
GATED = pod(
    conditions=[
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }
    ]
)
FRESH = pod()


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (UNSCHEDULABLE, "Unschedulable: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."),
        (IMAGE_PULL, 'container main: ImagePullBackOff: Back-off pulling image "ghcr.io/acme/nope:1"'),
        (
            CRASHLOOP,
            "container main: CrashLoopBackOff: back-off 40s restarting failed "
            "container=main pod=ft-abcde_ml(uid) (last termination: exit code 1 (Error); restarts: 3)",
        ),
        (OOM, "container main terminated with exit code 137 (OOMKilled)"),
        (EVICTED, "pod failed: Evicted: The node was low on resource: memory."),
        (INIT_FAILED, "container fetch terminated with exit code 2 (Error): no such bucket"),
        (CONFIG_ERROR, 'container main: CreateContainerConfigError: secret "hf-token" not found'),
        (GATED, "SchedulingGated: Scheduling is blocked due to non-empty scheduling gates"),
        (CREATING, None),
        (RUNNING, None),
        (SUCCEEDED, None),
        (FRESH, None),
        ({}, None),
    ],
)
def test_pod_problem(obj, expected):
    assert pod_problem(obj) == expected


@pytest.mark.parametrize(
    ("obj", "kind"),
    [
        (FRESH, "admission"),
        (UNSCHEDULABLE, "admission"),
        (GATED, "admission"),
        (CREATING, "startup"),
        (IMAGE_PULL, "startup"),
        (INIT_FAILED, "startup"),
        (RUNNING, "running"),
        (CRASHLOOP, "running"),
        (pod(phase="Unknown", node="n"), "running"),
        (SUCCEEDED, "done"),
        (OOM, "done"),
        (EVICTED, "done"),
    ],
)
def test_pod_phase_kind(obj, kind):
    assert pod_phase_kind(obj) == kind


def test_pods_phase_kind_is_the_least_advanced():
    assert pods_phase_kind([]) is None
    assert pods_phase_kind([RUNNING, UNSCHEDULABLE]) == "admission"
    assert pods_phase_kind([RUNNING, IMAGE_PULL, SUCCEEDED]) == "startup"
    assert pods_phase_kind([OOM, RUNNING]) == "running"
    assert pods_phase_kind([OOM, SUCCEEDED]) == "done"


def test_scheduling_message_is_the_schedulers_words():
    assert scheduling_message(UNSCHEDULABLE) == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    assert scheduling_message(RUNNING) is None
    assert scheduling_message(FRESH) is None


def test_pods_problems_prefixes_pod_names():
    worker = {**IMAGE_PULL, "metadata": {"name": "pt-worker-1"}}
    assert pods_problems([RUNNING, worker]) == [
        '[pt-worker-1] container main: ImagePullBackOff: Back-off pulling image "ghcr.io/acme/nope:1"'
    ]


@pytest.mark.parametrize(
    ("state", "pods", "phase"),
    [
        (WorkloadState("succeeded", "CompletionsReached"), [RUNNING], "done"),
        (WorkloadState("failed", "DeadlineExceeded"), [], "done"),
        (WorkloadState("pending", "JobSuspended"), [], "admission"),
        (WorkloadState("pending", "PyTorchJobSuspended"), [RUNNING], "admission"),
        (WorkloadState("pending", "Created"), [], "admission"),
        (WorkloadState("running", "Running"), [UNSCHEDULABLE], "admission"),
        (WorkloadState("running", "Running"), [IMAGE_PULL], "startup"),
        (WorkloadState("running", "Running"), [RUNNING, CREATING], "startup"),
        (WorkloadState("running", "Running"), [RUNNING], "running"),
        (WorkloadState("running", "Retrying"), [], "startup"),
        (WorkloadState("running", "Retrying"), [OOM], "startup"),
    ],
)
def test_deadline_phase(state, pods, phase):
    assert deadline_phase(state, pods) == phase
