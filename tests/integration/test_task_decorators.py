"""``@task.finetune_job``, ``@task.pytorch_job`` and ``@task.train_job`` against the local cluster, each
decorator through the same four stories: the function's return value as the task's XCom, a failure naming
the pod and the exception's last line, a deadline expiring (workload deleted, nothing left running), and a
retry resuming from the checkpoint the failed attempt committed (the function gets ``resume_from``).

The task is built as a DAG file builds it (``from airflow.sdk import task``: the decorators come from the
provider metadata) and run as Airflow runs it (execute -> TaskDeferred -> the revived trigger ->
``execute_complete``). ``tests/integration/test_examples.py`` runs the example DAG through ``airflow dags
test`` (the task runner's XCom push).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG, task

from airflow_k8s_ml.errors import DeadlineExceeded, WorkloadFailed

from .test_trainjob_cluster import fail_fast_runtime
from .training_helpers import DictTaskStateStore, make_context, pods, run_task
from .trainjob_helpers import GROUP, VERSION

pytestmark = pytest.mark.usefixtures("kube_conn")

#: The decorators and what each needs besides the shared arguments: one worker (two pods per run), and
#: a failed replica fails the run (the PyTorchJob's default ``OnFailure`` restarts it in place).
#: A TrainJob: two nodes (two pods per run, as the PyTorchJob).
DECORATORS = {
    "finetune_job": {},
    "pytorch_job": {"workers": 1, "restart_policy": "Never"},
    "train_job": {"num_nodes": 2},
}
#: The replica names a failure may quote instead of the pod's name.
REPLICAS = {"finetune_job": [], "pytorch_job": ["master-0", "worker-0"], "train_job": ["node-0", "node-1"]}
FAST = {"image": "python:3.11", "pod_options": {"termination_grace_period_seconds": 2}}


def train(steps: int, resume_from: str | None = None, checkpoint_uri: str | None = None) -> dict[str, Any]:
    """The decorated function (module level: its source is what travels to the pod)."""
    import os

    rank = int(os.environ.get("RANK") or os.environ.get("PET_NODE_RANK") or "0")
    print(f"rank {rank} training {steps} steps", flush=True)
    return {"steps": steps, "rank": rank, "loss": 0.125}


def diverge(steps: int) -> None:
    print("step 1 loss 0.5", flush=True)
    raise FloatingPointError(f"loss is nan at step 2 of {steps}")


def hang() -> None:
    import time

    print("epoch 1 of 100", flush=True)
    time.sleep(120)


def resumable(checkpoint_uri: str | None = None, resume_from: str | None = None) -> str | None:
    """Attempt 1 commits step 1 then dies; attempt 2 gets that checkpoint as ``resume_from``."""
    from airflow_k8s_ml.checkpoints import CheckpointWriter

    if resume_from is None:
        CheckpointWriter(checkpoint_uri).commit(1, {"w.json": b"{}"}, metrics={"loss": 0.5})
        raise RuntimeError("preempted after step 1")
    return resume_from


def failing(decorator: str, custom: Any, namespace: str) -> dict[str, Any]:
    """Arguments under which a raised exception fails the run at once: the default torch-distributed
    runtime restarts a failed node in place (``OnFailure``), as the PyTorchJob's default does, so a
    TrainJob runs on a namespaced runtime whose node Job gives up at the first failure."""
    if decorator != "train_job":
        return {}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "trainingruntimes", fail_fast_runtime("ff")
    )
    return {"runtime": "ff", "runtime_kind": "TrainingRuntime"}


def build(decorator: str, function: Any, *call: Any, **arguments: Any) -> Any:
    """The operator of ``@task.<decorator>(**arguments)`` on ``function``, called with ``call``."""
    with DAG(f"decorated_{function.__name__}", schedule=None):
        decorated = getattr(task, decorator)(**{**FAST, **DECORATORS[decorator], **arguments})(function)
        return decorated(*call).operator


@pytest.mark.parametrize("decorator", sorted(DECORATORS))
def test_the_return_value_is_the_xcom(decorator: str, namespace: str) -> None:
    op = build(decorator, train, 3, namespace=namespace, run_timeout=60)
    assert run_task(op, make_context(op.task_id)) == {"steps": 3, "rank": 0, "loss": 0.125}


@pytest.mark.parametrize("decorator", sorted(DECORATORS))
def test_a_failure_names_the_pod_and_the_exceptions_last_line(
    decorator: str, namespace: str, core: Any, custom: Any
) -> None:
    op = build(
        decorator, diverge, 5, namespace=namespace, run_timeout=60, **failing(decorator, custom, namespace)
    )
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context(op.task_id))
    message = str(info.value)
    assert "FloatingPointError: loss is nan at step 2 of 5" in message, message
    failed = [p.metadata.name for p in pods(core, namespace) if p.status.phase == "Failed"]
    # the pod by its replica name (a PyTorchJob's master-0/worker-0, a TrainJob's node-0/node-1), or by its
    # name (a Job's pod)
    names = [*failed, *REPLICAS[decorator]]
    assert failed and any(f"[{name}]" in message for name in names), (failed, message)
    first = message.splitlines()[0]  # (other failed replicas follow, one line each)
    assert first.count("loss is nan") == 1, message  # the termination message, not again as a log line


@pytest.mark.parametrize("decorator", sorted(DECORATORS))
def test_a_deadline_expiring_deletes_the_workload(decorator: str, namespace: str, core: Any) -> None:
    op = build(decorator, hang, namespace=namespace, run_timeout=2)
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context(op.task_id))
    assert info.value.deadline == "run_timeout" and str(info.value).startswith("run_timeout 2s exceeded")
    assert pods(core, namespace) == []


@pytest.mark.parametrize("decorator", sorted(DECORATORS))
def test_a_retry_resumes_from_the_checkpoint(
    decorator: str, namespace: str, tmp_path: Path, custom: Any
) -> None:
    base = f"file://{tmp_path}/ckpt"
    op = build(
        decorator,
        resumable,
        namespace=namespace,
        run_timeout=60,
        checkpoint_uri=base,
        resume_from="latest",
        **failing(decorator, custom, namespace),
    )
    store = DictTaskStateStore()
    with pytest.raises(WorkloadFailed, match="RuntimeError: preempted after step 1"):
        run_task(op, make_context(op.task_id, store=store))
    returned = run_task(op, make_context(op.task_id, store=store, try_number=2))
    assert returned == f"{base}/step-1/"


def test_the_decorators_own_arguments_are_refused_at_parse_time() -> None:
    with pytest.raises(TypeError, match="'command': the decorated function is the container's program"):
        build("finetune_job", train, 1, command=["python"])
