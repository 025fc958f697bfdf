"""Disruptions are not failures, under a real scheduler, triggerer and API server: the shipped nightly DAG
(Job mode, triggered over REST with no logical date) has its training pod evicted twice mid-run by the
Eviction API (a drain). The task succeeds in its first try - no retry spent, one Job - the log names both
evictions and the checkpoints each replacement resumed from, the gate finds the final step as without
evictions, and the XCom counts the two disruptions.

The nightly DAG gives its training tasks ``retries=2``; a retry spent would show as try 2 (and a second Job),
so "first try, one Job" is what ``retries=0`` would demand. Epochs are slowed through the workload's own
test hook (``SLEEP_PER_EPOCH``, read from the environment the run's Secret fills), restored afterwards, so
the evictions land mid-run on a loaded machine.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.manifests.naming import RUN_ID_LABEL, TASK_ID_LABEL
from tests.production.conftest import Production, epoch_lines, wait_until

DAG, TASK, NAMESPACE, SECRET = "nightly_finetune", "fine_tune_job", "ml", "s3-credentials"
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
def test_the_nightly_training_pod_evicted_twice_succeeds_in_its_first_try(production: Production) -> None:
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
    assert ti["state"] == "success" and ti["try_number"] == 1, (ti["state"], lines[-20:])  # no retry spent
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
