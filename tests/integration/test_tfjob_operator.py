"""TFJobOperator against the local cluster's TFJob controller: the task's whole life (execute -> defer ->
trigger -> execute_complete) with the real trigger; no mocks.

Covers: a Chief, two Workers and a PS prove the topology from TF_CONFIG (the reference workload) and
succeed, every line relayed with its replica's prefix; a failing worker fails the task naming the replica
and its last line; the Kubernetes-side ``activeDeadlineSeconds`` and the Airflow-side run deadline; a
worker crash mid-wait (the retry adopts: exactly one TFJob); kill while deferred deletes it; Kubeflow's v1
SDK (``TrainingClient(job_kind="TFJob")``) creates and waits on a TFJob unchanged.
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
from airflow_k8s_ml.operators import TFJobOperator
from airflow_k8s_ml.operators._adopt import STATE_KEY
from tests.cluster_fixtures import wait_for

from .tfjob_helpers import GROUP, PLURAL, TOPOLOGY, VERSION
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

REPO = Path(__file__).resolve().parents[2]

#: Every test runs with ``kubernetes_default`` pointing at the shared test cluster.
pytestmark = pytest.mark.usefixtures("kube_conn")


def tfjobs(custom: client.CustomObjectsApi, namespace: str) -> list[dict[str, Any]]:
    return list(custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"])


def tf(task_id: str, namespace: str, command: list[str], **kwargs: Any) -> TFJobOperator:
    """A TFJobOperator (Chief + 2 Workers by default) running ``command`` from this checkout."""
    kwargs.setdefault("workers", 2)
    return TFJobOperator(
        task_id=task_id,
        namespace=namespace,
        image="python:3.11",
        command=command,
        env={"PYTHONPATH": str(REPO)},  # the pods run on the host's Python: this checkout's package
        pod_options={"termination_grace_period_seconds": 2},
        **kwargs,
    )


def running(core: Any, namespace: str) -> int:
    return sum(1 for p in pods(core, namespace) if p.status.phase == "Running")


def no_tfjob_and_no_pods(custom: Any, core: Any, namespace: str) -> bool:
    return not tfjobs(custom, namespace) and not pods(core, namespace)


def test_chief_workers_and_ps_succeed_and_every_line_carries_its_replica(
    custom: Any, core: Any, namespace: str, capsys: Any
) -> None:
    result = run_task(tf("topo", namespace, TOPOLOGY, ps=1), make_context("topo"))
    [job] = tfjobs(custom, namespace)
    assert result["kind"] == "TFJob" and result["uid"] == job["metadata"]["uid"]
    assert result["state"]["phase"] == "succeeded" and result["state"]["reason"] == "TFJobSucceeded"
    assert job["metadata"]["labels"]["airflow-k8s-ml/task-id"] == "topo"
    specs = job["spec"]["tfReplicaSpecs"]
    assert {t: s["replicas"] for t, s in specs.items()} == {"Chief": 1, "PS": 1, "Worker": 2}
    assert specs["Worker"]["template"]["spec"]["containers"][0]["name"] == "tensorflow"
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    log = task_log(capsys)
    assert "[chief-0] task chief 0; cluster 1 chief, 1 ps, 2 worker;" in log
    assert "[chief-0] hello from worker 0" in log and "[chief-0] hello from worker 1" in log
    assert "[chief-0] topology complete" in log
    assert "[worker-1] reported to the coordinator at " in log
    # the parameter server serves forever: cleanPodPolicy Running stops it once the Chief succeeded
    wait_for(lambda: running(core, namespace) == 0, timeout=60, what="no replica left running")


FAIL_ON_WORKER_1 = (
    "import json, os, sys, time\n"
    "task = json.loads(os.environ['TF_CONFIG'])['task']\n"
    "if task == {'type': 'worker', 'index': 1}:\n"
    "    print('worker 1: OOM in the input pipeline', flush=True); time.sleep(0.5); sys.exit(3)\n"
    "time.sleep(60)\n"
)


def test_a_failing_worker_fails_the_task_naming_the_replica_and_its_last_line(namespace: str) -> None:
    with pytest.raises(WorkloadFailed) as info:
        run_task(tf("flaky", namespace, py(FAIL_ON_WORKER_1)), make_context("flaky"))
    message = str(info.value)
    assert message.startswith(f"TFJob {namespace}/training-flaky-")
    assert f"(TFJobFailed): TFJob {namespace}/training-flaky-" in message
    assert "has failed because 1 Worker replica(s) failed." in message
    assert "[worker-1] container tensorflow terminated with exit code 3" in message
    assert "worker 1: OOM in the input pipeline" in message


def test_kubernetes_side_active_deadline_is_the_failure_reason(
    custom: Any, core: Any, namespace: str
) -> None:
    op = tf("slow", namespace, py("import time; time.sleep(120)"), active_deadline_seconds=2)
    with pytest.raises(WorkloadFailed) as info:
        run_task(op, make_context("slow"))
    assert "(DeadlineExceeded): Job training-slow-" in str(info.value)
    assert "has failed because it was active longer than specified deadline" in str(info.value)
    [job] = tfjobs(custom, namespace)
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 2
    wait_for(lambda: not pods(core, namespace), timeout=60, what="the TFJob's pods gone")


def test_run_deadline_deletes_the_tfjob_and_leaves_no_pods(
    custom: Any, core: Any, namespace: str, capsys: Any
) -> None:
    code = "import time; print('epoch 1 of 100', flush=True); time.sleep(120)"
    with pytest.raises(DeadlineExceeded) as info:
        run_task(tf("stuck", namespace, py(code), run_timeout=2), make_context("stuck"))
    assert info.value.deadline == "run_timeout"
    wait_for(lambda: no_tfjob_and_no_pods(custom, core, namespace), timeout=60, what="TFJob and pods gone")
    assert "epoch 1 of 100" in task_log(capsys)  # the last lines were logged before the deletion


CRASHING_WORKER = """
import sys
sys.path.insert(0, {repo!r})
from tests.integration.training_helpers import DictTaskStateStore, make_context
from airflow_k8s_ml.operators import TFJobOperator

op = TFJobOperator(task_id="crashy", namespace={namespace!r}, image="python:3.11", command={command!r},
                   workers=2, deferrable=False, poll_interval=0.2)
op.execute(make_context("crashy", store=DictTaskStateStore({store!r})))
"""


def test_worker_crash_mid_wait_is_adopted_exactly_one_tfjob(
    custom: Any, core: Any, namespace: str, tmp_path: Path
) -> None:
    store_file = tmp_path / "task_state_store.json"
    command = py("import time; print('step', flush=True); time.sleep(4); print('done', flush=True)")
    script = CRASHING_WORKER.format(
        repo=str(REPO), namespace=namespace, command=command, store=str(store_file)
    )
    worker = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=dict(os.environ))
    try:
        wait_for(lambda: worker.poll() is not None or running(core, namespace) > 0, timeout=60)
        assert worker.poll() is None, "the worker died on its own"
        wait_for(store_file.exists, what="the task state stored")
    finally:
        worker.send_signal(signal.SIGKILL)  # the Airflow worker dies; the TFJob keeps running
        worker.wait()
    [before] = tfjobs(custom, namespace)
    store = DictTaskStateStore(store_file)
    assert store.get(STATE_KEY)["uid"] == before["metadata"]["uid"]

    retry = TFJobOperator(
        task_id="crashy", namespace=namespace, image="python:3.11", command=command, workers=2
    )
    result = run_task(retry, make_context("crashy", store=store, try_number=2))
    [after] = tfjobs(custom, namespace)  # exactly one TFJob, the same one
    assert after["metadata"]["uid"] == before["metadata"]["uid"] == result["uid"]
    assert result["state"]["phase"] == "succeeded" and result["attempts"] == 1


def test_kill_while_deferred_deletes_the_tfjob(custom: Any, core: Any, namespace: str) -> None:
    op = tf("killme", namespace, py("import time; print('up', flush=True); time.sleep(120)"))
    deferred = execute_until_deferred(op, make_context("killme"))

    async def kill_while_waiting() -> None:
        trigger = revive(deferred.trigger)
        waiting = asyncio.create_task(first_event(trigger))
        while running(core, namespace) < 3:
            await asyncio.sleep(0.1)
        waiting.cancel()  # what the triggerer does when the user marks the task failed ...
        await asyncio.gather(waiting, return_exceptions=True)
        await trigger.on_kill()  # ... then asks the trigger to stop the external work

    run_async(kill_while_waiting())
    wait_for(lambda: no_tfjob_and_no_pods(custom, core, namespace), timeout=60, what="TFJob and pods gone")


def test_kubeflow_v1_sdk_creates_and_waits_on_a_tfjob(cluster: Any, core: Any, namespace: str) -> None:
    """Kubeflow's own v1 SDK, unchanged, against the local cluster: create_job, wait_for_job_conditions,
    get_job_pod_names, and its models (``KubeflowOrgV1TFJob``) for the body."""
    from kubeflow.training import TrainingClient
    from kubeflow.training import models as m

    container = client.V1Container(
        name="tensorflow",
        image="python:3.11",
        command=TOPOLOGY,
        env=[client.V1EnvVar("PYTHONPATH", str(REPO))],
    )
    template = client.V1PodTemplateSpec(spec=client.V1PodSpec(containers=[container]))
    job = m.KubeflowOrgV1TFJob(
        api_version="kubeflow.org/v1",
        kind="TFJob",
        metadata=client.V1ObjectMeta(name="sdk", namespace=namespace),
        spec=m.KubeflowOrgV1TFJobSpec(
            run_policy=m.KubeflowOrgV1RunPolicy(clean_pod_policy="Running"),
            tf_replica_specs={
                "Chief": m.KubeflowOrgV1ReplicaSpec(replicas=1, restart_policy="Never", template=template),
                "Worker": m.KubeflowOrgV1ReplicaSpec(replicas=2, restart_policy="Never", template=template),
            },
        ),
    )
    sdk = TrainingClient(config_file=str(cluster.kubeconfig_path), job_kind="TFJob")
    sdk.create_job(job, namespace=namespace)
    done = sdk.wait_for_job_conditions("sdk", namespace=namespace, timeout=120, polling_interval=1)
    assert isinstance(done, m.KubeflowOrgV1TFJob)
    assert sdk.is_job_succeeded("sdk", namespace=namespace)
    assert done.status.conditions[-1].reason == "TFJobSucceeded"
    names = sdk.get_job_pod_names("sdk", namespace=namespace, is_master=True)
    assert names == ["sdk-chief-0"]
