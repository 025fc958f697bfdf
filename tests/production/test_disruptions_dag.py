"""Disruptions are not failures, under a real scheduler, triggerer and API server, triggered over REST with no
logical date, pods evicted mid-run by the Eviction API through the ``kubernetes`` client (as ``kubectl drain``
evicts).

- The nightly DAG (Job mode), built by the shipped file's ``build`` with ``retries=0`` on its training tasks
  (``tests/production/dags/nightly_no_retries.py``): its training pod evicted twice, the task succeeds in its
  one try with one Job, the log names both evictions and the checkpoints each replacement resumed from, the
  gate finds the final step as without evictions, and the XCom counts the two disruptions. Epochs are slowed
  through the workload's own test hook (``SLEEP_PER_EPOCH``, read from the environment the run's Secret
  fills), restored afterwards, so the evictions land mid-run on a loaded machine.
- A PyTorchJob (``tests/production/dags/pytorch_eviction.py``, ``retries=0``): its worker evicted while both
  ranks run; what the kind supports (docs/operators.md, "What each kind can do"): the controller recreates
  the worker under its name and the run succeeds in its one try, one PyTorchJob, the eviction named in the
  log.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.manifests.naming import RUN_ID_LABEL, TASK_ID_LABEL
from tests.production.conftest import Production, epoch_lines, wait_until

DAG, TASK, NAMESPACE, SECRET = "nightly_finetune_no_retries", "fine_tune_job", "ml", "s3-credentials"
EPOCHS = 4


@pytest.fixture
def slow_epochs(production: Production) -> Iterator[None]:
    core = production.core()
    before = core.read_namespaced_secret(SECRET, NAMESPACE)
    patch = {"data": {"SLEEP_PER_EPOCH": base64.b64encode(b"4").decode()}}
    core.patch_namespaced_secret(SECRET, NAMESPACE, patch)
    try:
        yield
    finally:
        core.patch_namespaced_secret(SECRET, NAMESPACE, {"data": {"SLEEP_PER_EPOCH": None}})
        after = core.read_namespaced_secret(SECRET, NAMESPACE)
        assert after.data == before.data


def training_pod(core: Any, job: str, not_in: set[str]) -> Any:
    found = core.list_namespaced_pod(NAMESPACE, label_selector=f"batch.kubernetes.io/job-name={job}").items
    return next(
        (
            p
            for p in found
            if p.status.phase == "Running"
            and not p.metadata.deletion_timestamp
            and p.metadata.name not in not_in
        ),
        None,
    )


def evict(core: Any, name: str) -> None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=NAMESPACE))
    core.create_namespaced_pod_eviction(name, NAMESPACE, body)


@pytest.mark.timeout(1500)  # the tier's start (first test of a session) and the whole DAG on a busy box
@pytest.mark.usefixtures("slow_epochs")
def test_the_nightly_training_pod_evicted_twice_succeeds_with_retries_0(production: Production) -> None:
    core, batch = production.core(), production.batch()
    existing = {j.metadata.uid for j in batch.list_namespaced_job(NAMESPACE).items}
    run_id = production.rest.trigger(
        DAG, {"epochs": EPOCHS, "max_train_samples": 600, "accuracy_threshold": 0.5}
    )
    assert production.rest.run(DAG, run_id)["logical_date"] is None

    def new_job() -> Any:
        jobs = batch.list_namespaced_job(NAMESPACE, label_selector=f"{TASK_ID_LABEL}={TASK}").items
        return next((j for j in jobs if j.metadata.uid not in existing), None)

    try:
        job = wait_until("the run's training Job", new_job, timeout=600).metadata.name
    except AssertionError as exc:
        states = {ti["task_id"]: ti["state"] for ti in production.rest.task_instances(DAG, run_id)}
        raise AssertionError(f"{exc}; task states: {states}") from None

    def log() -> list[str]:
        return production.log_lines(DAG, run_id, TASK, 1)

    evicted: list[str] = []
    for step in (1, 2):  # the first pod once it committed step 1, its replacement once it committed step 2
        wait_until(
            f"checkpoint step {step} in the task log",
            lambda s=step: any(f"checkpoint step={s} uri=" in line for line in log()),
            timeout=300,
        )
        pod = wait_until("a running training pod", lambda: training_pod(core, job, set(evicted)), timeout=120)
        evict(core, pod.metadata.name)
        evicted.append(pod.metadata.name)

    ti = production.rest.wait_task_state(
        DAG, run_id, TASK, {"success", "failed", "up_for_retry"}, timeout=600
    )
    lines = log()
    assert ti["max_tries"] == 0, ti  # retries=0: a disruption that spent a retry could not succeed
    assert ti["state"] == "success" and ti["try_number"] == 1, (ti["state"], lines[-20:])
    run = production.rest.wait_run(DAG, run_id, timeout=900)
    assert run["state"] == "success", [line for line in lines if "rror" in line][-5:]
    for name in evicted:
        assert any(f"pod {name} disrupted: EvictionByEvictionAPI" in line for line in lines), name
    resumed = [
        int(m.group(1))
        for line in lines
        if (m := re.search(r"resuming from \S+/checkpoints/nightly/\S+/step-(\d+)/ \(step", line))
    ]
    # each replacement resumed from the newest checkpoint its predecessor committed, never from scratch
    assert len(resumed) == 2 and resumed[0] >= 1 and resumed[1] >= 2 and resumed[1] > resumed[0], resumed
    result = production.rest.xcom(DAG, run_id, TASK)
    assert result["attempts"] == 1 and result["disruptions"]["count"] == 2, result["disruptions"]
    run_label = batch.read_namespaced_job(job, NAMESPACE).metadata.labels[RUN_ID_LABEL]
    selector = f"{RUN_ID_LABEL}={run_label},{TASK_ID_LABEL}={TASK}"  # the run's batch scoring Job is another
    assert len(batch.list_namespaced_job(NAMESPACE, label_selector=selector).items) == 1
    gate = production.rest.xcom(DAG, run_id, "checkpoint_gate")
    assert gate["step"] == EPOCHS  # the final step count, as without evictions
    assert epoch_lines(lines)[-1] == f"epoch={EPOCHS}/{EPOCHS}"


PYTORCH_DAG, REPLICA = "pytorch_eviction", "training.kubeflow.org/replica-type"


def pytorchjobs(production: Production, run_id: str) -> list[dict[str, Any]]:
    items = client.CustomObjectsApi(production.api).list_namespaced_custom_object(
        "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", label_selector=f"airflow-k8s-ml/dag-id={PYTORCH_DAG}"
    )["items"]
    return [j for j in items if j["metadata"].get("annotations", {}).get("airflow-k8s-ml/run-id") == run_id]


def running_worker(core: Any, job: str, not_uid: str = "") -> Any:
    selector = f"training.kubeflow.org/job-name={job},{REPLICA}=worker"
    return next(
        (
            p
            for p in core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp and p.metadata.uid != not_uid
        ),
        None,
    )


@pytest.mark.timeout(900)
def test_a_pytorchjob_worker_evicted_mid_run_is_recreated_and_the_run_succeeds_with_retries_0(
    production: Production, tmp_path: Path
) -> None:
    core, release = production.core(), tmp_path / "release"
    run_id = production.rest.trigger(PYTORCH_DAG, {"release": str(release)})
    assert production.rest.run(PYTORCH_DAG, run_id)["logical_date"] is None
    job = wait_until("the run's PyTorchJob", lambda: pytorchjobs(production, run_id), timeout=600)[0]
    name = job["metadata"]["name"]

    def log() -> list[str]:
        return production.log_lines(PYTORCH_DAG, run_id, "train", 1)

    def said(text: str, lines: list[str]) -> int:
        return sum(text in line for line in lines)

    wait_until(
        "both ranks waiting in the task log",
        lambda: (
            (lines := log())
            and said("[master-0] rank 0 waiting", lines)
            and said("[worker-0] rank 1 waiting", lines)
        ),
        timeout=300,
    )
    worker = wait_until("the running worker", lambda: running_worker(core, name), timeout=60)
    evict(core, worker.metadata.name)  # a drain, mid-run: both ranks are still waiting for the release
    again = wait_until(
        "the worker recreated", lambda: running_worker(core, name, worker.metadata.uid), timeout=300
    )
    assert again.metadata.name == worker.metadata.name  # the controller recreates it under its name
    wait_until(
        "the eviction named in the task log",
        lambda: any(f"pod {worker.metadata.name} disrupted: EvictionByEvictionAPI" in line for line in log()),
        timeout=120,
    )
    release.touch()

    ti = production.rest.wait_task_state(
        PYTORCH_DAG, run_id, "train", {"success", "failed", "up_for_retry"}, timeout=600
    )
    lines = log()
    assert ti["max_tries"] == 0, ti
    assert ti["state"] == "success" and ti["try_number"] == 1, (ti["state"], lines[-20:])
    assert len(pytorchjobs(production, run_id)) == 1
    assert said("[worker-0] rank 1 waiting", lines) == 2, lines[-30:]  # the recreated worker ran again
    assert said("[worker-0] rank 1 done", lines) == 1 and said("[master-0] rank 0 done", lines) == 1, lines[
        -20:
    ]
    result = production.rest.xcom(PYTORCH_DAG, run_id, "train")
    assert result["kind"] == "PyTorchJob" and result["attempts"] == 1, result
    assert result["disruptions"]["count"] == 1, result["disruptions"]
    assert result["disruptions"]["pods"][0]["reason"] == "EvictionByEvictionAPI", result["disruptions"]
