"""Disruptions are not failures, end to end: the real ``finetune`` workload run by ``FineTuneJobOperator``
(``backoff_limit=0``, one attempt) is evicted twice mid-run - once by a drain (the Eviction API), once by the
kubelet under node pressure - and still succeeds in that one attempt: the Job's pod failure policy ignores
``DisruptionTarget`` pods, each replacement resumes from the newest complete checkpoint, and the task log
names both disruptions. No mocks: the local cluster's Job controller, the real trigger, torch, file://.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

import airflow_k8s_ml
from airflow_k8s_ml.checkpoints import CheckpointStore
from airflow_k8s_ml.operators import FineTuneJobOperator
from tests.cluster_fixtures import wait_for

from .training_helpers import execute_until_deferred, jobs, make_context, pods, resume

pytest.importorskip("torch")

EPOCHS = 4
pytestmark = pytest.mark.usefixtures("kube_conn")


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

    wait_for(lambda: committed(tmp_path, 1), timeout=60)
    first = wait_for(lambda: running_pod(core, namespace, set()), timeout=10)
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=first.metadata.name, namespace=namespace))
    core.create_namespaced_pod_eviction(first.metadata.name, namespace, eviction)  # a drain

    second = wait_for(lambda: running_pod(core, namespace, {first.metadata.name}), timeout=30)
    done_before = max(s for s in range(1, EPOCHS + 1) if committed(tmp_path, s))
    wait_for(lambda: committed(tmp_path, done_before + 1), timeout=60)
    cluster.call(  # node pressure: the kubelet kills it, the pod stays Failed/Evicted
        lambda: cluster.cluster.admin_actions["evict"]({"namespace": namespace, "name": second.metadata.name})
    )

    result = resume(op, deferred, context)

    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1
    found = jobs(batch, namespace)
    assert len(found) == 1 and not found[0].status.failed  # neither disruption was counted
    final = CheckpointStore(base).latest_complete()
    assert final is not None and final.step == EPOCHS
    assert [c.step for c in CheckpointStore(base).list() if c.complete] == list(range(1, EPOCHS + 1))
    log = capsys.readouterr()
    text = log.out + log.err
    # This harness runs the trigger only after both evictions, when the drained pod is already gone from the
    # API: the wait names the pod still there (a live trigger's pod watch sees the drained one too).
    assert f"pod {second.metadata.name} disrupted: TerminationByKubelet: The node was low on resource" in text
    assert f"[{second.metadata.name}] resuming from {base}/step-1/ (step 1)" in text  # not from scratch
    assert f"resuming from {base}/step-{done_before}/ (step {done_before})" in text
