"""TrainJobOperator against the local cluster's Kubeflow Trainer v2 (TrainJob -> JobSet -> Jobs -> pods):
the task's whole life (execute -> defer -> trigger -> execute_complete) with the real trigger; no mocks.

Covers: two nodes succeed, every line relayed with its node's prefix; a failing node fails the task naming
the node and its last line; the Kubernetes-side ``activeDeadlineSeconds``; the Airflow-side run deadline and
the admission deadline of a suspended TrainJob (TrainJob deleted, no pods left); a worker crash mid-wait
(the retry adopts: exactly one TrainJob); kill while deferred deletes it; the shipped entrypoint's DDP from
the PET_* env; a raw TrainJob manifest; the sensor on a TrainJob created elsewhere.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.errors import DeadlineExceeded, WorkloadFailed
from airflow_k8s_ml.operators import TrainJobOperator
from airflow_k8s_ml.operators._adopt import STATE_KEY
from airflow_k8s_ml.triggers.log_cursor import CURSOR_ANNOTATION
from tests.cluster_fixtures import wait_for

from .test_trainjob_cluster import fail_fast_runtime
from .training_helpers import (
    DictTaskStateStore,
    execute_until_deferred,
    first_event,
    make_context,
    pods,
    py,
    revive,
    run_async,
    run_task,
    task_log,
)
from .trainjob_helpers import GROUP, VERSION

REPO = Path(__file__).resolve().parents[2]

#: Every test runs with ``kubernetes_default`` pointing at the shared test cluster.
pytestmark = pytest.mark.usefixtures("kube_conn")


def trainjobs(custom: client.CustomObjectsApi, namespace: str) -> list[dict[str, Any]]:
    return list(custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs")["items"])


def nodes(task_id: str, namespace: str, code: str, **kwargs: Any) -> TrainJobOperator:
    """A 2-node TrainJobOperator running ``code`` on every node (image and grace period of the tests)."""
    kwargs.setdefault("num_nodes", 2)
    return TrainJobOperator(
        task_id=task_id,
        namespace=namespace,
        image="python:3.11",
        command=py(code),
        pod_options={"termination_grace_period_seconds": 2},
        **kwargs,
    )


def running_nodes(core: Any, namespace: str) -> int:
    return sum(1 for p in pods(core, namespace) if p.status.phase == "Running")


def no_trainjob_and_no_pods(custom: Any, core: Any, namespace: str) -> bool:
    return not trainjobs(custom, namespace) and not pods(core, namespace)


RANKS = "import os; print('rank', os.environ['PET_NODE_RANK'], 'of', os.environ['PET_NNODES'], flush=True)"


def test_two_nodes_succeed_and_every_line_carries_its_node(
    custom: Any, core: Any, namespace: str, capsys: Any
) -> None:
    result = run_task(nodes("ddp", namespace, RANKS), make_context("ddp"))
    [job] = trainjobs(custom, namespace)
    assert result["kind"] == "TrainJob" and result["uid"] == job["metadata"]["uid"]
    assert result["state"]["phase"] == "succeeded" and result["state"]["reason"] == "AllJobsCompleted"
    assert job["metadata"]["labels"]["airflow-k8s-ml/task-id"] == "ddp"
    log = task_log(capsys)
    assert "[node-0] rank 0 of 2" in log and "[node-1] rank 1 of 2" in log
    assert CURSOR_ANNOTATION in job["metadata"]["annotations"]  # the relay's cursor persisted on the TrainJob
    # our runtime patch reached the nodes: run labels and the restrictive security defaults
    name = job["metadata"]["name"]
    node_pods = core.list_namespaced_pod(
        namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
    ).items
    assert len(node_pods) == 2
    for pod in node_pods:
        assert pod.metadata.labels["airflow-k8s-ml/task-id"] == "ddp"
        assert pod.spec.security_context.run_as_non_root is True
        [container] = pod.spec.containers
        assert container.name == "node" and container.security_context.allow_privilege_escalation is False


FAIL_ON_NODE_1 = (
    "import os, sys, time\n"
    "if os.environ['PET_NODE_RANK'] == '1':\n"
    "    print('node 1: NCCL timeout in all_reduce', flush=True); time.sleep(0.5); sys.exit(3)\n"
    "time.sleep(60)\n"
)


def test_a_failing_node_fails_the_task_naming_the_node_and_its_last_line(custom: Any, namespace: str) -> None:
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "trainingruntimes", fail_fast_runtime("ff")
    )
    op = nodes("flaky", namespace, FAIL_ON_NODE_1, runtime="ff", runtime_kind="TrainingRuntime")
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context("flaky"))
    message = str(info.value)
    assert message.startswith(f"TrainJob {namespace}/training-flaky-")
    assert "(FailedJobs): jobset failed due to one or more job failures" in message
    # node 0 was terminated by the JobSet because node 1 failed: node 1 is named first, with its last line
    assert "first failure: [node-1] container node terminated with exit code 3" in message
    assert "node 1: NCCL timeout in all_reduce" in message


def test_kubernetes_side_active_deadline_is_the_failure_reason(
    custom: Any, core: Any, namespace: str
) -> None:
    op = nodes("slow", namespace, "import time; time.sleep(120)", active_deadline_seconds=2)
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context("slow"))
    assert "(DeadlineExceeded): TrainJob exceeded its active deadline" in str(info.value)
    [job] = trainjobs(custom, namespace)
    assert job["spec"]["activeDeadlineSeconds"] == 2
    wait_for(lambda: not pods(core, namespace), timeout=60, what="the TrainJob's pods gone")


def test_run_deadline_deletes_the_trainjob_and_leaves_no_pods(
    custom: Any, core: Any, namespace: str, capsys: Any
) -> None:
    code = "import time; print('epoch 1 of 100', flush=True); time.sleep(120)"
    op = nodes("stuck", namespace, code, run_timeout=2)
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context("stuck"))
    assert info.value.deadline == "run_timeout"
    assert no_trainjob_and_no_pods(custom, core, namespace)
    assert "epoch 1 of 100" in task_log(capsys)  # the last lines were logged before the deletion


def test_admission_deadline_of_a_suspended_trainjob_deletes_it(
    custom: Any, core: Any, namespace: str
) -> None:
    op = nodes("queued", namespace, "print('never runs')", suspend=True, admission_timeout=1.5)
    with pytest.raises(DeadlineExceeded) as info:
        run_task(op, make_context("queued"))
    assert info.value.deadline == "admission_timeout"
    assert "TrainJob is suspended" in str(info.value)
    assert no_trainjob_and_no_pods(custom, core, namespace)


CRASHING_WORKER = """
import sys
sys.path.insert(0, {repo!r})
from tests.integration.training_helpers import DictTaskStateStore, make_context
from airflow_k8s_ml.operators import TrainJobOperator

op = TrainJobOperator(task_id="crashy", namespace={namespace!r}, image="python:3.11", command={command!r},
                      num_nodes=2, deferrable=False, poll_interval=0.2)
op.execute(make_context("crashy", store=DictTaskStateStore({store!r})))
"""


def test_worker_crash_mid_wait_is_adopted_exactly_one_trainjob(
    custom: Any, core: Any, namespace: str, tmp_path: Path
) -> None:
    store_file = tmp_path / "task_state_store.json"
    command = py("import time; print('step', flush=True); time.sleep(4); print('done', flush=True)")
    script = CRASHING_WORKER.format(
        repo=str(REPO), namespace=namespace, command=command, store=str(store_file)
    )
    worker = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=dict(os.environ))
    try:
        wait_for(lambda: worker.poll() is not None or running_nodes(core, namespace) > 0, timeout=60)
        assert worker.poll() is None, "the worker died on its own"
        wait_for(store_file.exists)
    finally:
        worker.send_signal(signal.SIGKILL)  # the worker dies; the TrainJob keeps running
        worker.wait()
    [before] = trainjobs(custom, namespace)
    store = DictTaskStateStore(store_file)
    assert store.get(STATE_KEY)["uid"] == before["metadata"]["uid"]

    retry = TrainJobOperator(
        task_id="crashy", namespace=namespace, image="python:3.11", command=command, num_nodes=2
    )
    result = run_task(retry, make_context("crashy", store=store, try_number=2))
    [after] = trainjobs(custom, namespace)  # exactly one TrainJob, the same one
    assert after["metadata"]["uid"] == before["metadata"]["uid"] == result["uid"]
    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1


def test_kill_while_deferred_deletes_the_trainjob(custom: Any, core: Any, namespace: str) -> None:
    op = nodes("killme", namespace, "import time; print('up', flush=True); time.sleep(120)")
    deferred = execute_until_deferred(op, make_context("killme"))

    async def kill_while_waiting() -> None:
        trigger = revive(deferred.trigger)
        waiting = asyncio.create_task(first_event(trigger))
        while running_nodes(core, namespace) < 2:
            await asyncio.sleep(0.1)
        waiting.cancel()  # what the triggerer does when the user marks the task failed ...
        await asyncio.gather(waiting, return_exceptions=True)
        await trigger.on_kill()  # ... then asks the trigger to stop the external work

    run_async(kill_while_waiting())
    wait_for(lambda: no_trainjob_and_no_pods(custom, core, namespace), timeout=60)


def test_finetune_runs_ddp_from_the_pet_env_of_two_nodes(
    custom: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    """The shipped entrypoint reads the torch runtime's PET_* variables (no torchrun): both nodes train
    together and only node 0 commits the checkpoint."""
    pytest.importorskip("torch")
    base = f"file://{tmp_path}/ckpt"
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "trainingruntimes", fail_fast_runtime("ff")
    )  # a broken entrypoint fails the test at once instead of after the Job's default six retries
    op = TrainJobOperator(
        task_id="finetune",
        namespace=namespace,
        runtime="ff",
        runtime_kind="TrainingRuntime",
        image="python:3.11",
        command=["python", "-m", "airflow_k8s_ml.workloads.finetune"],
        args=["--epochs", "1", "--max-train-samples", "256"],
        # the pods run on the host's Python: this checkout's package, not whichever one is installed
        env={"DIST_TIMEOUT_SECONDS": "60", "PYTHONPATH": str(REPO)},
        checkpoint_uri=base,
        num_nodes=2,
        num_proc_per_node=1,
        pod_options={"termination_grace_period_seconds": 2},
    )
    result = run_task(op, make_context("finetune"))
    assert result["state"]["phase"] == "succeeded"
    log = task_log(capsys)
    assert "[node-0] finetune start world_size=2 rank=0 " in log
    assert "[node-1] finetune start world_size=2 rank=1 " in log
    assert "[node-0] checkpoint step=1" in log and "[node-1] checkpoint step=" not in log
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step-1"]


def test_a_raw_trainjob_manifest_runs_with_the_injected_env(
    custom: Any, namespace: str, tmp_path: Path, capsys: Any
) -> None:
    manifest = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "whatever", "labels": {"team": "ml"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "image": "python:3.11",
                "command": py("import os, sys; print('ckpt', os.environ['CHECKPOINT_URI'], sys.argv[1:])"),
                "args": ["{{ resume_from }}"],
                "numNodes": 2,
            },
        },
    }
    op = TrainJobOperator(
        task_id="raw", namespace=namespace, manifest=manifest, checkpoint_uri=f"file://{tmp_path}"
    )
    result = run_task(op, make_context("raw"))
    [job] = trainjobs(custom, namespace)
    assert result["uid"] == job["metadata"]["uid"] and job["metadata"]["name"].startswith("training-raw-")
    assert job["metadata"]["labels"]["team"] == "ml"
    log = task_log(capsys)
    assert f"[node-0] ckpt file://{tmp_path} ['']" in log and f"[node-1] ckpt file://{tmp_path} ['']" in log


def test_the_sensor_waits_for_a_trainjob_it_did_not_create(custom: Any, namespace: str) -> None:
    from airflow_k8s_ml.sensors import TrainingJobSensor

    launched = execute_until_deferred(nodes("elsewhere", namespace, RANKS), make_context("elsewhere"))
    sensor = TrainingJobSensor(
        task_id="wait", name=launched.trigger.name, namespace=namespace, kind="TrainJob"
    )
    result = run_task(sensor, make_context("wait"))
    assert result["kind"] == "TrainJob" and result["state"]["reason"] == "AllJobsCompleted"
    assert [j["metadata"]["uid"] for j in trainjobs(custom, namespace)] == [result["uid"]]
