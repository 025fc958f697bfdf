"""Queued (Kueue) training operators against the local cluster's Kueue: the task's whole life (execute ->
defer -> trigger -> execute_complete) with real Jobs, Workloads and pods; no mocks.

A ClusterQueue of 1 nvidia.com/gpu on a node advertising 4: two queued GPU tasks (one admitted, the other's
log says it waits, with the queue and Kueue's reason, then it is admitted and succeeds; one Job per task);
an admission deadline failing with Kueue's reason and deleting the Job and its Workload; a preempted task
reported as such and finishing by the documented rule (docs/waiting.md: re-admitted, no duplicate).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.errors import DeadlineExceeded

from ..cluster_fixtures import wait_for
from . import test_kueue_cluster
from .kueue_helpers import condition, make_priority_classes, make_queues, workload_of
from .training_helpers import finetune, jobs, make_context, run_task, task_log

pytestmark = pytest.mark.usefixtures("kube_conn")

#: The Kueue cluster tests' cluster: its node advertises 4 fake GPUs (only the queues' quota limits
#: these tests).
cluster = test_kueue_cluster.cluster

#: How the task log shows the first position of a queue (Kueue's positionInClusterQueue 0).
NEXT = "position 1 (next in line)"
QUOTA_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
    "default-flavor, 1 more needed"
)


def gated(path: Path, then: str = "print('done')") -> str:
    """Python that waits until ``path`` exists, then runs ``then``."""
    return f"import os, time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.05)\n{then}"


class Task:
    """One operator task run to its end in a thread (execute -> defer -> trigger -> resume)."""

    def __init__(self, op: Any, task_id: str) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(op, task_id), daemon=True)
        self.thread.start()

    def _run(self, op: Any, task_id: str) -> None:
        try:
            self.result = run_task(op, make_context(task_id))
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 90) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the task did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def log_reader(capsys: Any) -> Callable[[], str]:
    """The task log so far, accumulated across reads (each capsys read takes what came since the last)."""
    captured: list[str] = []

    def logged() -> str:
        captured.append(task_log(capsys))
        return "".join(captured)

    return logged


def job_named(batch: Any, namespace: str, task_id: str) -> Callable[[], Any]:
    def find() -> Any:
        return next(
            (j for j in jobs(batch, namespace) if j.metadata.labels.get("airflow-k8s-ml/task-id") == task_id),
            None,
        )

    return find


def admitted_task(
    batch: Any, custom: client.CustomObjectsApi, namespace: str, task_id: str, gate: Path, **kwargs: Any
) -> tuple[Task, Any]:
    """A queued 1-GPU task that runs until ``gate`` exists, started and waited for until Kueue admitted
    it; with its Job."""
    task = Task(finetune(task_id, namespace, gated(gate), gpus=1, **kwargs), task_id)
    job = wait_for(job_named(batch, namespace, task_id), what=f"{task_id}'s job")
    wait_for(
        lambda: condition(workload_of(custom, namespace, "Job", job.metadata.name), "Admitted").get("status"),
        lambda status: status == "True",
        what=f"{task_id} admitted",
    )
    return task, job


def test_second_queued_gpu_task_waits_with_kueues_reason_then_runs(
    batch: Any, custom: client.CustomObjectsApi, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    _, lq = make_queues(custom, namespace, gpus=1)
    gate = tmp_path / "first-may-finish"
    first, _ = admitted_task(batch, custom, namespace, "first", gate, queue_name=lq)
    second = Task(finetune("second", namespace, "print('second ran')", gpus=1, queue_name=lq), "second")
    job2 = wait_for(job_named(batch, namespace, "second"), what="second job")
    pending = wait_for(
        lambda: condition(workload_of(custom, namespace, "Job", job2.metadata.name), "QuotaReserved"),
        lambda c: c.get("status") == "False" and c.get("message") == QUOTA_MESSAGE,
        what="second pending on quota",
    )
    assert pending["reason"] == "Pending"
    waiting = (
        f"Job {namespace}/{job2.metadata.name} waiting for admission in queue {lq}, {NEXT} [Pending]: "
        f"{QUOTA_MESSAGE}"
    )
    logged = log_reader(capsys)

    wait_for(
        logged, lambda text: waiting in text, what="the second task's waiting line, while the first runs"
    )
    assert second.thread.is_alive()  # still waiting, deferred on the queue
    gate.touch()
    result1, result2 = first.join(), second.join()
    assert result1["state"]["phase"] == result2["state"]["phase"] == "succeeded"
    assert (
        result1["admitted_at"] and result2["admitted_at"] and result2["admitted_at"] >= result1["admitted_at"]
    )
    log = logged()
    assert f"Job {namespace}/{job2.metadata.name} admitted by queue {lq}" in log
    assert log.count(waiting) == 1  # said once, not on every look
    assert "[training-second-" in log and "second ran" in log  # it ran after the wait
    assert sorted(j.metadata.labels["airflow-k8s-ml/task-id"] for j in jobs(batch, namespace)) == [
        "first",
        "second",
    ]


def test_admission_deadline_fails_with_kueues_reason_and_deletes_job_and_workload(
    batch: Any, custom: client.CustomObjectsApi, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    _, lq = make_queues(custom, namespace, gpus=1)
    gate = tmp_path / "holder-may-finish"
    holder, _ = admitted_task(batch, custom, namespace, "holder", gate, queue_name=lq)
    op = finetune("starved", namespace, "print('never runs')", gpus=1, queue_name=lq, admission_timeout=2)
    task = Task(op, "starved")
    job = wait_for(job_named(batch, namespace, "starved"), what="the job")
    wait_for(lambda: workload_of(custom, namespace, "Job", job.metadata.name), what="its workload")
    with pytest.raises(DeadlineExceeded) as info:
        task.join()
    assert info.value.deadline == "admission_timeout"
    assert str(info.value) == f"admission_timeout 2s exceeded: {QUOTA_MESSAGE}"
    assert f"waiting for admission in queue {lq}, {NEXT} [Pending]: {QUOTA_MESSAGE}" in task_log(capsys)
    wait_for(lambda: not job_named(batch, namespace, "starved")(), what="the job deleted")
    wait_for(
        lambda: not workload_of(custom, namespace, "Job", job.metadata.name), what="its Workload collected"
    )
    gate.touch()
    assert holder.join()["state"]["phase"] == "succeeded"


def test_preempted_task_is_reported_requeued_and_finishes_without_duplicate(
    batch: Any, custom: client.CustomObjectsApi, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    _, lq = make_queues(custom, namespace, gpus=1, preemption="LowerPriority")
    low_class, high_class = "low-" + namespace[-6:], "high-" + namespace[-6:]
    make_priority_classes(custom, **{low_class: 10, high_class: 1000})
    gate = tmp_path / "low-may-finish"
    low_labels = {"kueue.x-k8s.io/priority-class": low_class}
    low, low_job = admitted_task(batch, custom, namespace, "low", gate, queue_name=lq, labels=low_labels)
    what = f"Job {namespace}/{low_job.metadata.name}"
    preempted = f"{what} was preempted in queue {lq}: Preempted to accommodate a workload"
    logged = log_reader(capsys)

    # The low task's wait has seen its admission before the high one arrives (else its first look may
    # already find it preempted, and the log rightly says "admitted" once).
    wait_for(logged, lambda text: f"{what} admitted by queue {lq}" in text, what="the low task admitted")
    high_labels = {"kueue.x-k8s.io/priority-class": high_class}
    high_gate = tmp_path / "high-may-finish"
    high_op = finetune(
        "high", namespace, gated(high_gate, "print('high ran')"), gpus=1, queue_name=lq, labels=high_labels
    )
    high = Task(high_op, "high")

    # While the high-priority task holds the GPU, the low one's log says it was preempted and it waits.
    wait_for(logged, lambda text: preempted in text, what="the low task's preemption line")
    assert low.thread.is_alive() and "Kueue suspends and requeues it" in logged()
    high_gate.touch()
    assert high.join()["state"]["phase"] == "succeeded"
    gate.touch()
    result = low.join()
    assert result["state"]["phase"] == "succeeded"
    log = logged()
    assert log.count(preempted) == 1
    assert log.count(f"{what} admitted by queue {lq}") == 2  # admitted, preempted, admitted again
    low_jobs = [j for j in jobs(batch, namespace) if j.metadata.labels["airflow-k8s-ml/task-id"] == "low"]
    assert [j.metadata.uid for j in low_jobs] == [low_job.metadata.uid]  # the same Job: no duplicate
    assert result["uid"] == low_job.metadata.uid


def _gang_operator(kind: str, namespace: str, lq: str) -> Any:
    """A queued 2-pod gang of ``kind`` asking 1 GPU per pod, with a 2 s admission budget."""
    from airflow_k8s_ml.operators import PyTorchJobOperator, TrainJobOperator

    common = {
        "namespace": namespace,
        "image": "python:3.11",
        "command": ["python", "-c", "print('never runs')"],
        "queue_name": lq,
        "admission_timeout": 2,
    }
    if kind == "PyTorchJob":
        return PyTorchJobOperator(task_id="gang", workers=1, gpus=1, **common)
    return TrainJobOperator(task_id="gang", num_nodes=2, resources_per_node={"nvidia.com/gpu": 1}, **common)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        # the master's GPU fits the quota of 1, the worker's does not
        (
            "PyTorchJob",
            "pod set worker: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, "
            "1 more needed",
        ),
        # one pod set of 2 nodes: more than the whole quota
        (
            "TrainJob",
            "pod set node: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
            "request > maximum capacity (2 > 1)",
        ),
    ],
)
def test_queued_gang_kinds_wait_with_kueues_reason(
    kind: str, reason: str, custom: client.CustomObjectsApi, namespace: str, capsys: Any
) -> None:
    """PyTorchJobs and TrainJobs are followed the same way: their Workload found by the job's uid."""
    _, lq = make_queues(custom, namespace, gpus=1)
    with pytest.raises(DeadlineExceeded) as info:
        run_task(_gang_operator(kind, namespace, lq), make_context("gang"))
    assert str(info.value) == f"admission_timeout 2s exceeded: couldn't assign flavors to {reason}"
    line = f"waiting for admission in queue {lq}, {NEXT} [Pending]: couldn't assign flavors to {reason}"
    assert line in task_log(capsys)


def test_the_workers_wait_follows_the_queue_too(
    batch: Any, custom: client.CustomObjectsApi, namespace: str, capsys: Any
) -> None:
    """deferrable=False (and the sensor's pokes) read the Workload with a LIST per look: same line, same
    message."""
    _, lq = make_queues(custom, namespace, gpus=0)
    op = finetune(
        "polled",
        namespace,
        "print('never runs')",
        gpus=1,
        queue_name=lq,
        admission_timeout=1.5,
        deferrable=False,
        poll_interval=0.2,
    )
    reason = (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
        "default-flavor, request > maximum capacity (1 > 0)"
    )
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context("polled"))
    assert str(info.value) == f"admission_timeout 1.5s exceeded: {reason}"
    log = task_log(capsys)
    assert log.count(f"waiting for admission in queue {lq}, {NEXT} [Pending]: {reason}") == 1
    wait_for(lambda: not jobs(batch, namespace), what="the job deleted")


def test_waiting_task_logs_its_position_and_moves_up(
    batch: Any,
    custom: client.CustomObjectsApi,
    namespace: str,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three queued 1-GPU tasks, a quota of 1: the third's trigger reads its position from Kueue's
    visibility API (second in line), and logs the move to the head when the first finishes and the second
    is admitted - a change of the queue, not of its own Workload (the periodic ask finds it)."""
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__KUEUE_POSITION_SECONDS", "0.3")
    _, lq = make_queues(custom, namespace, gpus=1)
    first_gate, second_gate = tmp_path / "first-may-finish", tmp_path / "second-may-finish"
    first, _ = admitted_task(batch, custom, namespace, "first", first_gate, queue_name=lq)
    second = Task(finetune("second", namespace, gated(second_gate), gpus=1, queue_name=lq), "second")
    job2 = wait_for(job_named(batch, namespace, "second"), what="second job")
    wait_for(lambda: workload_of(custom, namespace, "Job", job2.metadata.name), what="second's Workload")
    third = Task(finetune("third", namespace, "print('third ran')", gpus=1, queue_name=lq), "third")
    job3 = wait_for(job_named(batch, namespace, "third"), what="third job")
    where = f"Job {namespace}/{job3.metadata.name} waiting for admission in queue {lq}"
    logged = log_reader(capsys)

    wait_for(logged, lambda text: f"{where}, position 2 (1 ahead) [Pending]" in text, what="third at 2")
    first_gate.touch()  # the first ends: the second is admitted, the third is next
    wait_for(logged, lambda text: f"{where}, {NEXT} [Pending]" in text, what="third moved up")
    second_gate.touch()
    assert [t.join()["state"]["phase"] for t in (first, second, third)] == ["succeeded"] * 3
    log = logged()
    assert log.count(f"{where}, position 2 (1 ahead) [Pending]: {QUOTA_MESSAGE}") == 1
    assert log.count(f"{where}, {NEXT} [Pending]: {QUOTA_MESSAGE}") == 1
    assert f"Job {namespace}/{job3.metadata.name} admitted by queue {lq}" in log


def test_without_the_visibility_api_the_wait_goes_on_without_a_position(
    batch: Any,
    custom: client.CustomObjectsApi,
    namespace: str,
    capsys: Any,
    cluster: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster whose Kueue serves no visibility API (every pendingworkloads GET answers 404, as an API
    server without that group does): the line carries no position, the wait ends by its deadline as today."""
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__KUEUE_POSITION_SECONDS", "0.3")
    _, lq = make_queues(custom, namespace, gpus=0)
    cluster.cluster.faults.configure({"rules": [{"resources": "localqueues/pendingworkloads", "code": 404}]})
    try:
        op = finetune("blind", namespace, "print('never runs')", gpus=1, queue_name=lq, admission_timeout=2)
        with pytest.raises(DeadlineExceeded) as info:
            run_task(op, make_context("blind"))
        fired = cluster.cluster.faults.rules[0].fired
    finally:
        cluster.cluster.faults.clear()
    reason = (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
        "default-flavor, request > maximum capacity (1 > 0)"
    )
    assert str(info.value) == f"admission_timeout 2s exceeded: {reason}"
    log = task_log(capsys)
    assert log.count(f"waiting for admission in queue {lq} [Pending]: {reason}") == 1
    assert "position" not in log
    assert fired >= 2  # asked (on the first look and again after kueue_position_seconds), refused each time
    wait_for(lambda: not jobs(batch, namespace), what="the job deleted")
