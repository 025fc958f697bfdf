"""Stuck pods (pure): each cause read from what the kubelet and the scheduler write, said once per pod and
cause, the early failure on a cause waiting cannot heal (``decide``), the "still waiting" line, and the
default budgets a task gets when it sets none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_k8s_ml.config import default_budgets
from airflow_k8s_ml.deadlines import DEFAULT_ADMISSION_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, Deadlines
from airflow_k8s_ml.status.stuck import PERMANENT, PERMANENT_AFTER_GRACE, StuckRules, stuck_causes
from airflow_k8s_ml.status.wait_report import Look, Pace, Said, events_ask, report
from tests.unit.pod_objects import GPU_MESSAGE, unschedulable_pod
from tests.unit.test_status_wait import PENDING, T0, TARGET

NON_ROOT = 'container has runAsNonRoot and image will run as root (pod: "ft-a_ml(p1)", container: main)'


def starting(waiting: dict[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    """A scheduled, Pending pod of the Job ``ft`` whose container ``main`` waits as ``waiting`` says."""
    status: dict[str, Any] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}
        ],
    }
    if waiting is not None:
        status["containerStatuses"] = [{"name": "main", "state": {"waiting": waiting}, **container}]
    return {
        "metadata": {"name": "ft-a", "uid": "p1", "ownerReferences": [{"kind": "Job", "uid": "u1"}]},
        "spec": {"nodeName": "local-node", "containers": [{"name": "main"}]},
        "status": status,
    }


PULL = starting({"reason": "ImagePullBackOff", "message": 'Back-off pulling image "forbidden.example/x:1"'})
ERR_PULL = starting({"reason": "ErrImagePull", "message": "pull access denied"})
INVALID = starting({"reason": "InvalidImageName", "message": 'couldn\'t parse image name "Trainer:1"'})
ROOTED = starting({"reason": "CreateContainerConfigError", "message": NON_ROOT})
NO_SECRET = starting({"reason": "CreateContainerConfigError", "message": 'secret "creds" not found'})
CRASHING = starting(
    {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container=main"},
    restartCount=3,
    lastState={"terminated": {"exitCode": 2, "reason": "Error"}},
)
CREATING = starting({"reason": "ContainerCreating"})
MOUNT_EVENT = {
    "type": "Warning",
    "reason": "FailedMount",
    "message": 'MountVolume.SetUp failed for volume "creds" : secret "creds" not found',
    "involvedObject": {"kind": "Pod", "name": "ft-a", "uid": "p1"},
}


@pytest.mark.parametrize(
    ("pod", "text", "heals"),
    [
        (unschedulable_pod(), f"Unschedulable: {GPU_MESSAGE}", None),
        (PULL, 'container main: ImagePullBackOff: Back-off pulling image "forbidden.example/x:1"', None),
        (INVALID, 'container main: InvalidImageName: couldn\'t parse image name "Trainer:1"', PERMANENT),
        (ROOTED, f"container main: CreateContainerConfigError: {NON_ROOT}", PERMANENT),
        (
            NO_SECRET,
            'container main: CreateContainerConfigError: secret "creds" not found',
            PERMANENT_AFTER_GRACE,
        ),
        (
            CRASHING,
            "container main: CrashLoopBackOff: back-off 10s restarting failed container=main "
            "(restarts: 3; last exit code 2 (Error))",
            None,
        ),
    ],
)
def test_each_cause_in_the_clusters_words(pod: dict[str, Any], text: str, heals: str | None) -> None:
    [cause] = stuck_causes(pod)
    assert (cause.text, cause.heals) == (text, heals)


def test_a_volume_that_cannot_be_mounted_is_read_from_the_pods_events() -> None:
    assert stuck_causes(CREATING) == []
    [cause] = stuck_causes(CREATING, [MOUNT_EVENT])
    assert cause.text == f"FailedMount: {MOUNT_EVENT['message']}"
    assert cause.heals == PERMANENT_AFTER_GRACE  # a missing Secret: permanent after the grace period
    attaching = {**MOUNT_EVENT, "message": 'MountVolume.SetUp failed for volume "data" : timed out'}
    assert stuck_causes(CREATING, [attaching])[0].heals is None  # may heal by waiting
    look = Look(PENDING, [CREATING])
    assert events_ask(look, Said(), now=T0, every=10)
    assert not events_ask(look, Said(events_at=T0), now=T0 + 5, every=10)
    assert not events_ask(Look(PENDING, [PULL]), Said(), now=T0, every=10)  # its status says why


def lines_of(*looks: tuple[list[dict[str, Any]], float], pace: Pace | None = None) -> list[list[str]]:
    said, out = Said(), []
    for pods, now in looks:
        told = report(TARGET, Look(PENDING, pods), said, now=now, deadlines=Deadlines(), pace=pace)
        said = told.said
        out.append([line.text for line in told.lines])
    return out


def test_a_stuck_pod_is_named_at_the_first_look_and_once_per_cause() -> None:
    first, again, other = lines_of(([PULL], T0), ([ERR_PULL], T0 + 1), ([CRASHING], T0 + 2))
    assert first == [
        "Job ml/ft: pod ft-a is stuck: container main: ImagePullBackOff: Back-off pulling image "
        '"forbidden.example/x:1"'
    ]
    assert again == []  # ErrImagePull and ImagePullBackOff alternate: one cause
    assert other and "CrashLoopBackOff" in other[0]


def test_a_crash_loop_asks_for_the_containers_last_lines() -> None:
    told = report(TARGET, Look(PENDING, [CRASHING]), Said(), now=T0, deadlines=Deadlines())
    assert [line.tail for line in told.lines] == [("ft-a", "main")]


def test_silence_gets_a_still_waiting_line_every_period() -> None:
    pace = Pace(still_every=60)
    looks = lines_of(
        ([CREATING], T0), ([CREATING], T0 + 30), ([CREATING], T0 + 61), ([CREATING], T0 + 90), pace=pace
    )
    assert looks[0] == [] and looks[1] == [] and looks[3] == []
    [line] = looks[2]
    assert line.startswith("Job ml/ft: still waiting for its pods to start since 2023-11-14T22:13:2")
    assert "1 pod(s) still starting" in line


def test_the_next_look_is_due_for_the_still_waiting_line() -> None:
    told = report(
        TARGET, Look(PENDING, [PULL]), Said(), now=T0, deadlines=Deadlines(), pace=Pace(still_every=60)
    )
    assert told.next_look_at == T0 + 60


@pytest.mark.parametrize("pod", [INVALID, ROOTED])
def test_a_cause_waiting_cannot_heal_fails_at_once(pod: dict[str, Any]) -> None:
    told = report(TARGET, Look(PENDING, [pod]), Said(), now=T0, deadlines=Deadlines())
    decision = told.decision
    assert (decision.verdict, decision.expired) == ("deadline", "startup_timeout")
    assert decision.message.startswith("startup_timeout cut short: [ft-a] container main: ")
    assert told.diagnose is not None  # the usual deadline path: diagnostics, then the workload deleted


def test_fail_fast_off_waits_and_names_the_pod() -> None:
    pace = Pace(stuck=StuckRules(fail_fast=False))
    told = report(TARGET, Look(PENDING, [ROOTED]), Said(), now=T0, deadlines=Deadlines(), pace=pace)
    assert told.decision.verdict == "wait" and "runAsNonRoot" in told.lines[0].text


def test_a_missing_secret_fails_after_its_grace_period() -> None:
    pace = Pace(stuck=StuckRules(config_grace=120))
    said = Said()
    first = report(TARGET, Look(PENDING, [NO_SECRET]), said, now=T0 + 10, deadlines=Deadlines(), pace=pace)
    assert first.decision.verdict == "wait"
    since = first.said.clock.since
    assert first.decision.next_look_at == since + 120
    later = report(
        TARGET, Look(PENDING, [NO_SECRET]), first.said, now=since + 120, deadlines=Deadlines(), pace=pace
    )
    assert later.decision.verdict == "deadline" and 'secret "creds" not found' in later.decision.message


def test_default_budgets_fill_only_what_the_task_did_not_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_budgets() == {
        "admission_timeout": DEFAULT_ADMISSION_TIMEOUT.total_seconds(),
        "startup_timeout": DEFAULT_STARTUP_TIMEOUT.total_seconds(),
    }
    filled = Deadlines.parse(startup_timeout=60).with_defaults(**default_budgets())
    assert filled.startup_timeout == timedelta(seconds=60)
    assert filled.admission_timeout == DEFAULT_ADMISSION_TIMEOUT
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__DEFAULT_ADMISSION_TIMEOUT", "0")
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__DEFAULT_STARTUP_TIMEOUT", "5")
    assert default_budgets() == {"admission_timeout": None, "startup_timeout": 5.0}
