"""A PyTorchJob's worker evicted mid-run (training-operator v1 semantics, docs/operators.md): with
``restart_policy="OnFailure"`` (the operator's default) the controller recreates the deleted pod under its
name, the run goes on and the task succeeds in one attempt, the disruption counted in the XCom and named in
the log. Real HTTP: the operator, the trigger, the local cluster's PyTorchJob controller, the Eviction API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.operators import PyTorchJobOperator
from tests.cluster_fixtures import wait_for

from .test_disruptions import Background, Log, evict
from .training_helpers import execute_until_deferred, make_context, pods, py

pytestmark = pytest.mark.usefixtures("kube_conn")

REPLICA = "training.kubeflow.org/replica-type"


def running(core: Any, namespace: str, replica: str, not_uid: str = "") -> Any:
    return next(
        (
            p
            for p in pods(core, namespace)
            if p.metadata.labels.get(REPLICA) == replica
            and p.status.phase == "Running"
            and not p.metadata.deletion_timestamp
            and p.metadata.uid != not_uid
        ),
        None,
    )


def test_an_evicted_worker_is_recreated_and_the_run_succeeds_in_one_attempt(
    core: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    release = tmp_path / "release"
    code = (
        "import os, pathlib, time\n"
        "print('rank', os.environ['RANK'], 'waiting', flush=True)\n"
        f"while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.2)\n"
        "print('rank', os.environ['RANK'], 'done', flush=True)\n"
    )
    op = PyTorchJobOperator(
        task_id="ddp",
        namespace=namespace,
        image="python:3.11",
        command=py(code),
        workers=1,
        poll_interval=0.5,
        pod_options={"termination_grace_period_seconds": 1},
    )
    context = make_context("ddp")
    waiting = Background(op, execute_until_deferred(op, context), context)
    log = Log(capsys)
    worker = wait_for(lambda: running(core, namespace, "worker"), timeout=60, what="worker-0 running")
    wait_for(
        lambda: log.has("[worker-0] rank 1 waiting") and log.has("[master-0] rank 0 waiting"), timeout=60
    )
    evict(core, namespace, worker.metadata.name)
    again = wait_for(
        lambda: running(core, namespace, "worker", not_uid=worker.metadata.uid),
        timeout=60,
        what="worker back",
    )
    assert again.metadata.name == worker.metadata.name  # recreated under the same name
    release.touch()
    waiting.join(timeout=120)
    assert waiting.error is None, f"the run failed: {waiting.error!r}"
    result = waiting.result
    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1
    assert result["disruptions"]["count"] == 1, result["disruptions"]
    assert result["disruptions"]["pods"][0]["reason"] == "EvictionByEvictionAPI"
    assert log.has(f"pod {worker.metadata.name} disrupted: EvictionByEvictionAPI")
