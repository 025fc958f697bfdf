"""Faults users meet, under real Airflow components: the triggerer killed mid-training, the task process
killed between creating the Job and deferring, a deferred task marked failed from the REST API.

Each asserts what a user would check: the run's outcome, how many Jobs exist (``kubectl get jobs -l``),
and the training lines in the task log of the try.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from datetime import datetime

import psutil

from tests.production.conftest import Production, epoch_lines, wait_until
from tests.production.dags.fault_training import EPOCHS, STEPS, WINDOW_MARKER

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
    """The triggerer's whole process tree killed -9 at a seeded moment inside a burst of training lines (one
    every 20 ms, no quiet spell, no regard for the relay's cursor), restarted after a seeded pause whose lines
    must still arrive. The run succeeds on its first try with one Job, and the try's log holds every line
    exactly once: the new trigger resumes after the last line the task log holds (triggers/log_ledger), so
    neither what the killed relay sent after its last cursor write nor what its supervisor never wrote to
    the file is repeated or lost."""
    moments = random.Random(int(os.environ.get("KILL_SEED", "28")))
    dag_id = "burst_training"
    run_id = production.rest.trigger(dag_id)
    production.rest.wait_task_state(dag_id, run_id, "train", {"deferred"}, timeout=120)
    kill_after = moments.randint(100, 250)  # with a second and more of relaying before it
    wait_until(
        f"step {kill_after} in the task log",
        lambda: max((n for _, n in _steps(production, dag_id, run_id)), default=0) >= kill_after,
    )
    killed = time.time()
    production.stack.kill_component("triggerer", signal.SIGKILL)
    time.sleep(moments.uniform(0, 2))
    production.stack.start_component("triggerer")
    run = production.rest.wait_run(dag_id, run_id, timeout=300)
    ti = production.rest.task_instance(dag_id, run_id, "train")
    assert run["state"] == "success" and ti["try_number"] == 1
    assert len(_jobs(production, dag_id, run_id)) == 1
    relayed = _steps(production, dag_id, run_id)
    before = [n for at, n in relayed if at < killed]
    assert before and len(before) < len(relayed), (
        f"the kill fell outside the burst: {len(before)} lines before"
    )
    steps = [n for _, n in relayed]
    repeated = sorted({n for n in steps if steps.count(n) > 1})
    lost = sorted(set(range(1, STEPS + 1)) - set(steps))
    assert steps == list(range(1, STEPS + 1)), (
        f"killed after step {max(before)}: repeated {repeated[:10]} ({len(repeated)}), "
        f"lost {lost[:10]} ({len(lost)})"
    )
    log = production.log_lines(dag_id, run_id, "train", 1)
    assert any("resuming the log relay after the last line in the task log" in line for line in log)


def _steps(production: Production, dag_id: str, run_id: str) -> list[tuple[float, int]]:
    """The ``step=K/N`` lines of the try's log: (when the triggerer logged it, K), in log order."""
    entries = production.rest.task_log(dag_id, run_id, "train", 1)
    found = []
    for entry in entries:
        match = re.search(r"\bstep=(\d+)/", str(entry.get("event", "")))
        if match and entry.get("timestamp"):
            found.append((_epoch(entry["timestamp"]), int(match.group(1))))
    return found


def _epoch(stamp: object) -> float:
    """An RFC 3339 timestamp (nanoseconds cut to microseconds) as seconds since the epoch."""
    text = str(stamp).replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = re.match(r"\d+", rest)
        assert digits is not None, stamp
        text = f"{head}.{digits.group(0)[:6]}{rest[digits.end() :]}"
    return datetime.fromisoformat(text).timestamp()


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
