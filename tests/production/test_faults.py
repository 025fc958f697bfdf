"""Faults users meet, under real Airflow components: the triggerer killed mid-training, the task process
killed between creating the Job and deferring, a deferred task marked failed from the REST API.

Each asserts what a user would check: the run's outcome, how many Jobs exist (``kubectl get jobs -l``),
and the training lines in the task log of the try.
"""

from __future__ import annotations

import signal
import time

import psutil

from tests.production.conftest import Production, epoch_lines, wait_until
from tests.production.dags.fault_training import EPOCHS, WINDOW_MARKER

EXPECTED = [f"epoch={k}/{EPOCHS}" for k in range(1, EPOCHS + 1)]


def _jobs(production: Production, dag_id: str, run_id: str) -> list[str]:
    """The run's Jobs, as ``kubectl get jobs -l airflow-k8s-ml/dag-id=...`` and the run-id annotation show."""
    items = (
        production.batch().list_namespaced_job("ml", label_selector=f"airflow-k8s-ml/dag-id={dag_id}").items
    )
    return [
        job.metadata.name
        for job in items
        if (job.metadata.annotations or {}).get("airflow-k8s-ml/run-id") == run_id
    ]


def _log_has(production: Production, dag_id: str, run_id: str, text: str, try_number: int = 1) -> bool:
    return any(text in line for line in production.log_lines(dag_id, run_id, "train", try_number))


def test_triggerer_killed_mid_training(production: Production) -> None:
    """As a user restarts it (a deploy, an OOM kill): ``kill -9`` 1.5 s after the first two epoch lines
    show in the task log, with no regard for the relay's cursor, then started again. Every line is in the
    log exactly once: the new trigger resumes after the last line the task log holds (triggers/log_ledger)."""
    run_id = production.rest.trigger("short_training")
    production.rest.wait_task_state("short_training", run_id, "train", {"deferred"}, timeout=120)
    wait_until("epoch 2 in the task log", lambda: _log_has(production, "short_training", run_id, "epoch=2/"))
    time.sleep(1.5)
    production.stack.kill_component("triggerer", signal.SIGKILL)
    time.sleep(3)  # lines printed while no triggerer runs must still reach the log
    production.stack.start_component("triggerer")
    run = production.rest.wait_run("short_training", run_id, timeout=300)
    ti = production.rest.task_instance("short_training", run_id, "train")
    assert run["state"] == "success" and ti["try_number"] == 1
    assert len(_jobs(production, "short_training", run_id)) == 1
    log = production.log_lines("short_training", run_id, "train", 1)
    assert epoch_lines(log) == EXPECTED
    assert any("resuming the log relay after the last line in the task log" in line for line in log)


def test_task_process_killed_after_create_before_defer(production: Production) -> None:
    dag_id = "slow_defer_training"
    run_id = production.rest.trigger(dag_id)
    wait_until(
        "the pause between create and defer",
        lambda: _log_has(production, dag_id, run_id, WINDOW_MARKER),
        timeout=180,
    )
    assert len(_jobs(production, dag_id, run_id)) == 1
    ti = production.rest.task_instance(dag_id, run_id, "train")
    titles = {p: " ".join(p.info["cmdline"] or []).strip() for p in psutil.process_iter(["cmdline"])}
    victims = [p for p, title in titles.items() if title == f"airflow worker -- {ti['id']}"]
    workers = sorted(t for t in titles.values() if t.startswith("airflow worker"))
    assert len(victims) == 1, f"no task process titled 'airflow worker -- {ti['id']}' among {workers}"
    victims[0].kill()
    run = production.rest.wait_run(dag_id, run_id, timeout=300)
    ti = production.rest.task_instance(dag_id, run_id, "train")
    assert run["state"] == "success" and ti["try_number"] == 2
    assert len(_jobs(production, dag_id, run_id)) == 1  # adopted, not duplicated
    assert epoch_lines(production.log_lines(dag_id, run_id, "train", 2)) == EXPECTED


def test_mark_deferred_task_failed_deletes_job_and_pods(production: Production) -> None:
    run_id = production.rest.trigger("short_training")
    production.rest.wait_task_state("short_training", run_id, "train", {"deferred"}, timeout=120)
    # as a user would: the training is visibly running in the task log, then they mark it failed
    wait_until("epoch 2 in the task log", lambda: _log_has(production, "short_training", run_id, "epoch=2/"))
    name = wait_until("the run's Job", lambda: _jobs(production, "short_training", run_id), timeout=60)[0]
    started = time.monotonic()
    production.rest.set_task_state("short_training", run_id, "train", "failed")

    def gone() -> bool:
        pods = production.core().list_namespaced_pod("ml", label_selector=f"job-name={name}").items
        return not _jobs(production, "short_training", run_id) and not pods

    wait_until("the Job and its pods to be deleted", gone, timeout=30)
    print(f"mark failed -> Job and pods gone in {time.monotonic() - started:.2f}s")
    assert production.rest.task_instance("short_training", run_id, "train")["state"] == "failed"
