"""Disruptions are not failures, end to end: the real ``finetune`` workload run by ``FineTuneJobOperator``
(``backoff_limit=0``, one attempt) is evicted twice mid-run - once by a drain (the Eviction API), once by the
kubelet under node pressure - and still succeeds in that one attempt: the Job's pod failure policy ignores
``DisruptionTarget`` pods, each replacement resumes from the newest complete checkpoint, and the task log
names both disruptions. No mocks: the local cluster's Job controller, the real trigger, torch, file://.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

import airflow_k8s_ml
from airflow_k8s_ml.checkpoints import CheckpointStore
from airflow_k8s_ml.errors import DeadlineExceeded
from airflow_k8s_ml.operators import FineTuneJobOperator
from airflow_k8s_ml.triggers.disruption_ledger import DISRUPTIONS_ANNOTATION
from tests.cluster_fixtures import wait_for

from .training_helpers import (
    execute_until_deferred,
    first_event,
    jobs,
    make_context,
    pods,
    resume,
    revive,
    run_async,
)
from .training_helpers import finetune as sleeper

pytest.importorskip("torch")

EPOCHS = 4
pytestmark = pytest.mark.usefixtures("kube_conn")


class Log:
    """The task log so far (what capsys captured), kept across reads."""

    def __init__(self, capsys: Any) -> None:
        self.capsys, self.text = capsys, ""

    def has(self, needle: str) -> bool:
        captured = self.capsys.readouterr()
        self.text += captured.out + captured.err
        return needle in self.text


class Background:
    """The trigger and the operator's finish running in a thread while the test disrupts the pods: the live
    wait sees every disruption as it happens (the drained pod too, before it is gone)."""

    def __init__(self, op: Any, deferred: Any, context: dict[str, Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(op, deferred, context), daemon=True)
        self.thread.start()

    def _run(self, op: Any, deferred: Any, context: dict[str, Any]) -> None:
        try:
            self.result = resume(op, deferred, context)
        except BaseException as exc:  # handed to the test
            self.error = exc

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the wait did not end within {timeout} s"


def evict(core: Any, namespace: str, name: str) -> None:
    """A drain's eviction (the Eviction API, as kubectl drain sends it)."""
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    core.create_namespaced_pod_eviction(name, namespace, eviction)


def finetune(namespace: str, base: str) -> FineTuneJobOperator:
    return FineTuneJobOperator(
        task_id="train",
        namespace=namespace,
        image="python:3.11",
        command=["python", "-m", "airflow_k8s_ml.workloads.finetune"],
        args=[
            "--epochs",
            str(EPOCHS),
            "--checkpoint-uri",
            base,
            "--sleep-per-epoch",
            "1",
            "--max-train-samples",
            "200",
        ],
        resume_from="latest",
        checkpoint_uri=base,
        backoff_limit=0,
        poll_interval=0.5,
        pod_options={"termination_grace_period_seconds": 1},
        # the pods (local processes) import this checkout's workload, not the one the venv installed
        env={"PYTHONPATH": str(Path(airflow_k8s_ml.__file__).parent.parent)},
    )


def running_pod(core: Any, namespace: str, not_in: set[str]) -> Any:
    return next(
        (
            p
            for p in pods(core, namespace)
            if p.metadata.name not in not_in
            and p.status.phase == "Running"
            and not p.metadata.deletion_timestamp
        ),
        None,
    )


def committed(tmp_path: Path, step: int) -> bool:
    return (tmp_path / "ckpt" / f"step-{step}" / "MANIFEST.json").is_file()


def test_a_job_evicted_twice_resumes_each_time_and_succeeds_in_one_attempt(
    cluster: Any, batch: Any, core: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    base = f"file://{tmp_path}/ckpt"
    context = make_context("train")
    op = finetune(namespace, base)
    deferred = execute_until_deferred(op, context)
    waiting = Background(op, deferred, context)

    wait_for(lambda: committed(tmp_path, 1), timeout=60)
    first = wait_for(lambda: running_pod(core, namespace, set()), timeout=10)
    evict(core, namespace, first.metadata.name)  # a drain

    second = wait_for(lambda: running_pod(core, namespace, {first.metadata.name}), timeout=30)
    done_before = max(s for s in range(1, EPOCHS + 1) if committed(tmp_path, s))
    wait_for(lambda: committed(tmp_path, done_before + 1), timeout=60)
    cluster.call(  # node pressure: the kubelet kills it, the pod stays Failed/Evicted
        lambda: cluster.cluster.admin_actions["evict"]({"namespace": namespace, "name": second.metadata.name})
    )

    waiting.join(timeout=180)
    assert waiting.error is None, f"the task failed: {waiting.error!r}"
    result = waiting.result

    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1
    figures = result["disruptions"]
    assert figures["count"] == 2, figures
    assert [p["reason"] for p in figures["pods"]] == ["EvictionByEvictionAPI", "TerminationByKubelet"]
    assert figures["lost_seconds"] is not None and figures["lost_seconds"] >= 0, figures
    found = jobs(batch, namespace)
    assert len(found) == 1 and not found[0].status.failed  # neither disruption was counted
    final = CheckpointStore(base).latest_complete()
    assert final is not None and final.step == EPOCHS
    assert [c.step for c in CheckpointStore(base).list() if c.complete] == list(range(1, EPOCHS + 1))
    log = capsys.readouterr()
    text = log.out + log.err
    assert f"pod {first.metadata.name} disrupted: EvictionByEvictionAPI" in text
    assert f"pod {second.metadata.name} disrupted: TerminationByKubelet: The node was low on resource" in text
    assert f"[{second.metadata.name}] resuming from {base}/step-1/ (step 1)" in text  # not from scratch
    assert f"resuming from {base}/step-{done_before}/ (step {done_before})" in text


def test_disruptions_past_max_disruptions_fail_the_task_with_the_count_and_leave_nothing(
    batch: Any, core: Any, namespace: str, capsys: Any
) -> None:
    code = "import time; print('training', flush=True); time.sleep(300)"
    op = sleeper("train", namespace, code, max_disruptions=1, backoff_limit=0, poll_interval=0.5)
    context = make_context("train")
    waiting = Background(op, execute_until_deferred(op, context), context)

    log = Log(capsys)
    taken: set[str] = set()
    for _ in range(2):
        pod = wait_for(lambda: running_pod(core, namespace, taken), timeout=60)
        # evicted once the wait follows it (its line relayed): a pod evicted before the trigger's pod watch
        # listed it, and gone at once (its process dies on SIGTERM), is one no wait can see
        line = f"[{pod.metadata.name}] training"
        wait_for(lambda line=line: log.has(line), timeout=60, what="the pod followed")
        evict(core, namespace, pod.metadata.name)
        taken.add(pod.metadata.name)

    waiting.join(timeout=120)
    assert isinstance(waiting.error, DeadlineExceeded), (
        f"expected the disruption budget, got {waiting.error!r}"
    )
    message = str(waiting.error)
    assert "evicted 2 times in this attempt, over max_disruptions 1" in message, message
    assert all(name in message for name in taken), message
    assert waiting.error.deadline == "max_disruptions"
    assert jobs(batch, namespace) == []  # the workload was deleted with its pods: zero objects left
    assert pods(core, namespace) == []
    assert "BackoffLimitExceeded" not in message


def persisted(batch: Any, namespace: str) -> list[str]:
    """The pods named in the Job's disruptions annotation (the attempt's count, as the wait persisted it)."""
    found = jobs(batch, namespace)
    raw = (found[0].metadata.annotations or {}).get(DISRUPTIONS_ANNOTATION) if found else None
    return [p["pod"] for p in json.loads(raw)["pods"]] if raw else []


def test_the_disruption_count_survives_a_trigger_restart_and_fails_the_task_with_the_full_count(
    batch: Any, core: Any, namespace: str, capsys: Any
) -> None:
    """One eviction seen by a trigger the triggerer then stops, one by the trigger built again from the same
    kwargs: together over ``max_disruptions=1``. The first pod is gone from the API before the second trigger
    starts, so only the count persisted on the Job can tell it; the task fails with both."""
    code = "import time; print('training', flush=True); time.sleep(300)"
    op = sleeper("train", namespace, code, max_disruptions=1, backoff_limit=0, poll_interval=0.5)
    context = make_context("train")
    deferred = execute_until_deferred(op, context)

    taken: list[str] = []
    log = Log(capsys)

    async def followed(pod: Any) -> None:
        """The wait follows the pod (its line relayed): an eviction from now on is one it sees."""
        line = f"[{pod.metadata.name}] training"
        await asyncio.to_thread(wait_for, lambda: log.has(line), timeout=60, what=f"{line!r} relayed")

    async def both_waits() -> dict[str, Any]:
        first = asyncio.create_task(first_event(revive(deferred.trigger)))
        one = await asyncio.to_thread(wait_for, lambda: running_pod(core, namespace, set()), timeout=60)
        await followed(one)
        await asyncio.to_thread(evict, core, namespace, one.metadata.name)
        taken.append(one.metadata.name)
        await asyncio.to_thread(
            wait_for, lambda: persisted(batch, namespace), timeout=30, what="the first disruption persisted"
        )
        assert not first.done(), first  # one disruption is within max_disruptions=1: the wait goes on
        first.cancel()  # the triggerer stops (restart, redistribution)
        await asyncio.gather(first, return_exceptions=True)
        await asyncio.to_thread(
            wait_for,
            lambda: one.metadata.name not in {p.metadata.name for p in pods(core, namespace)},
            timeout=60,
            what="the evicted pod gone from the API",
        )
        second = asyncio.create_task(first_event(revive(deferred.trigger)))
        two = await asyncio.to_thread(
            wait_for, lambda: running_pod(core, namespace, {one.metadata.name}), timeout=60
        )
        await followed(two)
        await asyncio.to_thread(evict, core, namespace, two.metadata.name)
        taken.append(two.metadata.name)
        try:
            async with asyncio.timeout(90):
                return await second
        except TimeoutError:
            raise AssertionError(
                "the restarted trigger did not end the wait within 90 s of the second eviction: it did not "
                f"count the first one (annotation: {persisted(batch, namespace)})"
            ) from None

    payload = run_async(both_waits())
    with pytest.raises(DeadlineExceeded) as info:
        op.resume_execution(deferred.method_name, {**(deferred.kwargs or {}), "event": payload}, context)
    message = str(info.value)
    assert "evicted 2 times in this attempt, over max_disruptions 1" in message, message
    assert all(name in message for name in taken), (taken, message)
    assert info.value.deadline == "max_disruptions"
    assert jobs(batch, namespace) == [] and pods(core, namespace) == []  # zero objects left
