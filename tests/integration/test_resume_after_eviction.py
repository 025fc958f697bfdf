"""Resume after a failed attempt, end to end: the real ``finetune`` workload run by ``FineTuneJobOperator`` on
the local cluster crashes (its ``--fail-at-epoch`` hook) after its first checkpoint; attempt 1 fails with the
exit code in its message; the retry (same task instance, next try) launches attempt 2 with ``RESUME_FROM`` =
the newest complete checkpoint, and the workload continues from that epoch to the end.

An eviction no longer takes this path: the Job's pod failure policy ignores a disruption and the Job
replaces the pod within the same attempt (tests/integration/test_disruptions.py).

No mocks: real Jobs and pods, the real trigger, the real torch training, checkpoints on ``file://``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.checkpoints import CheckpointStore
from airflow_k8s_ml.errors import WorkloadFailed
from airflow_k8s_ml.operators import FineTuneJobOperator
from tests.cluster_fixtures import wait_for

from .pod_helpers import read_log
from .training_helpers import execute_until_deferred, jobs, make_context, pods, resume, run_task

pytest.importorskip("torch")

EPOCHS = 3
ATTEMPT_LABEL = "airflow-k8s-ml/attempt"


#: Every test runs with ``kubernetes_default`` pointing at the shared test cluster.
pytestmark = pytest.mark.usefixtures("kube_conn")


def finetune(namespace: str, base: str, fail_at_epoch: int | None = None) -> FineTuneJobOperator:
    """A fresh operator object per try, as Airflow builds one per task run."""
    return FineTuneJobOperator(
        env={"FAIL_AT_EPOCH": str(fail_at_epoch)} if fail_at_epoch else None,
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
        pod_options={"termination_grace_period_seconds": 2},
    )


def attempt_pod(core: Any, namespace: str, attempt: int) -> Any:
    return next(
        (p for p in pods(core, namespace) if p.metadata.labels.get(ATTEMPT_LABEL) == str(attempt)), None
    )


def test_a_failed_training_job_is_retried_and_resumes_from_the_newest_complete_checkpoint(
    cluster: Any, batch: Any, core: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    base = f"file://{tmp_path}/ckpt"
    context = make_context("train")

    # Attempt 1: submitted, deferred; it commits epoch 1, then crashes in epoch 2 before its checkpoint.
    op1 = finetune(namespace, base, fail_at_epoch=2)
    deferred = execute_until_deferred(op1, context)
    captured = capsys.readouterr()
    assert f"no complete checkpoint under {base}" in captured.out + captured.err
    pod1 = wait_for(lambda: attempt_pod(core, namespace, 1), timeout=60)

    with pytest.raises(WorkloadFailed) as failure:
        resume(op1, deferred, context)  # the trigger sees the Job fail; execute_complete raises
    message = str(failure.value)
    assert message.startswith(f"Job {namespace}/training-train-") and "BackoffLimitExceeded" in message
    assert f"[{pod1.metadata.name}]" in message and "exit code 3" in message, message

    # What the retry must resume from: the newest complete checkpoint as it stands after the eviction.
    newest = CheckpointStore(base).latest_complete()
    assert newest is not None and 1 <= newest.step < EPOCHS
    resumed_uri = newest.uri

    # Attempt 2: the same task instance, next try (the task_state_store remembers attempt 1).
    retry_context = make_context("train", store=context["task_state_store"], try_number=2)
    result = run_task(finetune(namespace, base), retry_context)

    assert result["state"]["phase"] == "succeeded"
    assert result["attempts"] == 2 and result["name"].endswith("-a2")
    assert result["resumed_from"] == resumed_uri
    pod2 = attempt_pod(core, namespace, 2)
    log = read_log(core, namespace, pod2.metadata.name)  # the client's own text decoding is broken
    resumed = f"start_epoch={newest.step + 1} resume_from={resumed_uri} resumed_epoch={newest.step}"
    start_line = next(line for line in log.splitlines() if line.startswith("finetune start "))
    assert resumed in start_line, log
    first_epoch = next(line for line in log.splitlines() if line.startswith("epoch="))
    assert first_epoch.startswith(f"epoch={newest.step + 1}/{EPOCHS} ")  # no epoch re-run before it
    assert f"done epoch={EPOCHS}/{EPOCHS}" in log
    relayed = capsys.readouterr()  # the same line reached the task log through the trigger's log relay
    assert f"resuming from {resumed_uri} (step {newest.step})" in relayed.out + relayed.err
    assert f"{pod2.metadata.name}] finetune start" in relayed.out + relayed.err
    assert resumed in relayed.out + relayed.err

    final = CheckpointStore(base).latest_complete()
    assert final is not None and final.step == EPOCHS and final.metrics["epoch"] == EPOCHS
    assert [c.step for c in CheckpointStore(base).list() if c.complete] == list(range(1, EPOCHS + 1))

    found = sorted(jobs(batch, namespace), key=lambda j: j.metadata.name)
    assert [j.metadata.name[-3:] for j in found] == ["-a1", "-a2"]
    assert [j.metadata.labels[ATTEMPT_LABEL] for j in found] == ["1", "2"]
    assert {j.metadata.labels["airflow-k8s-ml/task-id"] for j in found} == {"train"}
