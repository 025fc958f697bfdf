"""Resume after eviction, end to end: the real ``finetune`` workload run by ``FineTuneJobOperator`` on the
local cluster is evicted by the kubelet (fault injection) after its first checkpoint; attempt 1 fails with
the eviction in its message; the retry (same task instance, next try) launches attempt 2 with
``RESUME_FROM`` = the newest complete checkpoint, and the workload continues from that epoch to the end.

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


def finetune(namespace: str, base: str) -> FineTuneJobOperator:
    """A fresh operator object per try, as Airflow builds one per task run."""
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
        pod_options={"termination_grace_period_seconds": 2},
    )


def attempt_pod(core: Any, namespace: str, attempt: int) -> Any:
    return next(
        (p for p in pods(core, namespace) if p.metadata.labels.get(ATTEMPT_LABEL) == str(attempt)), None
    )


def test_evicted_training_job_is_retried_and_resumes_from_the_newest_complete_checkpoint(
    cluster: Any, batch: Any, core: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    base = f"file://{tmp_path}/ckpt"
    context = make_context("train")

    # Attempt 1: submitted, deferred; it trains until its first checkpoint is committed.
    op1 = finetune(namespace, base)
    deferred = execute_until_deferred(op1, context)
    captured = capsys.readouterr()
    assert f"no complete checkpoint under {base}" in captured.out + captured.err
    wait_for((tmp_path / "ckpt" / "step-1" / "MANIFEST.json").is_file, timeout=60)

    # Node-pressure eviction by the kubelet, on the cluster's own loop.
    pod1 = wait_for(lambda: attempt_pod(core, namespace, 1), timeout=10)
    evicted = cluster.call(
        lambda: cluster.cluster.admin_actions["evict"]({"namespace": namespace, "name": pod1.metadata.name})
    )
    assert (evicted["status"]["phase"], evicted["status"]["reason"]) == ("Failed", "Evicted")

    with pytest.raises(WorkloadFailed) as failure:
        resume(op1, deferred, context)  # the trigger sees the Job fail; execute_complete raises
    message = str(failure.value)
    assert message.startswith(f"Job {namespace}/training-train-") and "BackoffLimitExceeded" in message
    assert f"[{pod1.metadata.name}] pod failed: Evicted: The node was low on resource" in message, message
    assert "exit code 137" in message  # killed by the kubelet, not a crash of the workload
    pod1 = core.read_namespaced_pod(pod1.metadata.name, namespace)
    disruption = [c for c in pod1.status.conditions or [] if c.type == "DisruptionTarget"]
    assert pod1.status.reason == "Evicted" and disruption and disruption[0].reason == "TerminationByKubelet"

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
