"""PyTorchJobOperator against the local cluster's kubeflow.org/v1 PyTorchJob controller: success with a
master and a worker, BackoffLimitExceeded naming the replica that failed first, and the Kubernetes-side
DeadlineExceeded, each through the operator's whole life (execute -> trigger -> execute_complete)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.errors import WorkloadFailed
from airflow_k8s_ml.operators import PyTorchJobOperator

from .training_helpers import make_context, pods, py, run_task

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


#: Every test runs with ``kubernetes_default`` pointing at the shared test cluster.
pytestmark = pytest.mark.usefixtures("kube_conn")


def pytorchjobs(custom: Any, namespace: str) -> list[dict[str, Any]]:
    return list(custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"])


def ddp(task_id: str, namespace: str, code: str, **kwargs: Any) -> PyTorchJobOperator:
    return PyTorchJobOperator(
        task_id=task_id,
        namespace=namespace,
        image="python:3.11",
        command=py(code),
        workers=1,
        pod_options={"termination_grace_period_seconds": 2},
        **kwargs,
    )


def test_success_with_master_and_worker(custom: Any, core: Any, namespace: str) -> None:
    code = "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"
    result = run_task(ddp("ddp", namespace, code, clean_pod_policy="None"), make_context("ddp"))
    [job] = pytorchjobs(custom, namespace)
    assert result["kind"] == "PyTorchJob" and result["uid"] == job["metadata"]["uid"]
    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1
    assert job["metadata"]["labels"]["airflow-k8s-ml/task-id"] == "ddp"
    roles = sorted(p.metadata.labels["training.kubeflow.org/replica-type"] for p in pods(core, namespace))
    assert roles == ["master", "worker"]


def test_backoff_limit_exceeded_names_the_replica_that_failed_first(custom: Any, namespace: str) -> None:
    code = (
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    print('worker: NCCL timeout in all_reduce', flush=True); time.sleep(0.5); sys.exit(1)\n"
        "time.sleep(60)\n"
    )
    op = ddp("flaky", namespace, code, restart_policy="OnFailure", backoff_limit=1)
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context("flaky"))
    message = str(info.value)
    assert message.startswith(f"PyTorchJob {namespace}/training-flaky-")
    assert "BackoffLimitExceeded" in message
    assert "worker-0" in message and "NCCL timeout in all_reduce" in message


def test_kubernetes_side_deadline_exceeded_is_the_failure_reason(custom: Any, namespace: str) -> None:
    op = ddp("slow", namespace, "import time; time.sleep(60)", active_deadline_seconds=1)
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context("slow"))
    assert "DeadlineExceeded" in str(info.value)
    [job] = pytorchjobs(custom, namespace)
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 1
