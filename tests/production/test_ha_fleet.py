"""Faults across the fleet, on Airflow as it runs in production: PostgreSQL, the CeleryExecutor with two
workers, two schedulers, two triggerers (``AirflowStack`` with ``ha=True``), runs triggered over REST with
no logical date.

- a triggerer killed (``kill -9``) while training tasks are deferred on both: its triggers move to the other,
  every task succeeds on its first try, one Job per task, every epoch line in each task log exactly once;
- a Celery worker killed after the Job was created and before the deferral: the retry adopts the Job;
- a scheduler killed mid-run: the other carries the run to success;
- deferred tasks marked failed (REST PATCH), on either triggerer: their Jobs are gone within 30 s.

Skipped, with what to install, where PostgreSQL or Redis cannot be had (``.ci/run`` installs both).
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from airflow_k8s_ml.testbed.backing_services import missing_backends
from tests.production.conftest import Production, epoch_lines, production_stack
from tests.production.dags.fault_training import EPOCHS as SHORT_EPOCHS
from tests.production.dags.fault_training import WINDOW_MARKER
from tests.production.dags.fleet_training import EPOCHS, FLEET, FLEET_LARGE

MISSING = missing_backends()
pytestmark = [
    pytest.mark.skipif(MISSING is not None, reason=f"the HA stack needs {MISSING}"),
    # the first test also starts the stack (initdb, migrations on PostgreSQL, eight components): minutes on
    # a loaded 2-core machine, over the suite's 300 s per test; each wait inside is bounded on its own
    pytest.mark.timeout(900),
]

FLEET_EXPECTED = [f"epoch={k}/{EPOCHS}" for k in range(1, EPOCHS + 1)]
SHORT_EXPECTED = [f"epoch={k}/{SHORT_EPOCHS}" for k in range(1, SHORT_EPOCHS + 1)]
DAG_IDS = ("short_training", "slow_defer_long_training", "fleet_training", "fleet_training_large")
#: What the retry's log says when it takes the Job over: still running, or already done by then.
ADOPTED = ("adopting active Job", "already succeeded; returning its result without relaunching")
TRIGGERERS = ("triggerer-1", "triggerer-2")


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Production]:
    with production_stack(tmp_path_factory.mktemp("production-ha"), DAG_IDS, ha=True) as production:
        yield production


def _jobs(production: Production, dag_id: str, run_id: str, task_id: str | None = None) -> list[str]:
    """The run's Jobs (of one task), as ``kubectl get jobs -l airflow-k8s-ml/dag-id=...`` shows them."""
    selector = f"airflow-k8s-ml/dag-id={dag_id}"
    items = production.batch().list_namespaced_job("ml", label_selector=selector).items
    return [
        job.metadata.name
        for job in items
        if (job.metadata.annotations or {}).get("airflow-k8s-ml/run-id") == run_id
        and (task_id is None or (job.metadata.labels or {}).get("airflow-k8s-ml/task-id") == task_id)
    ]


def _tree(production: Production, name: str) -> list[psutil.Process]:
    proc = production.stack.procs[name]
    root = psutil.Process(proc.pid)
    return [root, *root.children(recursive=True)]


def _triggerer_jobs(production: Production) -> dict[int, str]:
    """Triggerer job id -> component, from the trigger log files each triggerer's processes hold open
    (``<task log>.trigger.<job id>.log``): the job table names the same host for both."""
    found: dict[int, str] = {}
    for name in (name for name in TRIGGERERS if name in production.stack.procs):  # running ones
        for proc in _tree(production, name):
            try:
                files = proc.open_files()
            except psutil.Error:
                continue
            for opened in files:
                match = re.search(r"\.trigger\.(\d+)\.log$", opened.path)
                if match:
                    found[int(match.group(1))] = name
    return found


def _fleet(production: Production, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    return production.rest.task_instances(dag_id, run_id)


def _epochs(production: Production, dag_id: str, run_id: str, task_id: str) -> list[str]:
    return epoch_lines(production.log_lines(dag_id, run_id, task_id, 1))


def _kill_a_triggerer_across_the_fleet(production: Production, dag_id: str, size: int) -> None:
    run_id = production.rest.trigger(dag_id)
    tasks = [f"train_{i}" for i in range(size)]

    def all_relaying() -> bool:
        tis = _fleet(production, dag_id, run_id)
        deferred = [ti for ti in tis if ti["state"] == "deferred" and ti["trigger"]]
        return len(deferred) == size and all(
            len(_epochs(production, dag_id, run_id, ti["task_id"])) >= 2 for ti in deferred
        )

    # REST polls through AirflowRest.wait_for: a request timed out on a loaded machine counts as "not yet"
    wait = production.rest.wait_for
    wait(f"all {size} tasks deferred, epoch lines in their logs", all_relaying, timeout=400, interval=1)
    holders = Counter(ti["trigger"]["triggerer_id"] for ti in _fleet(production, dag_id, run_id))

    def known() -> dict[int, str] | None:
        jobs = _triggerer_jobs(production)
        return jobs if set(holders) <= set(jobs) else None

    components = wait("the holders' trigger log files open", known, timeout=30)
    victim_job, held = holders.most_common(1)[0]
    victim = components[victim_job]
    survivor = next(name for name in TRIGGERERS if name != victim)
    print(
        f"triggers per triggerer job: {dict(holders)}; killing {victim} (job {victim_job}, {held} triggers)"
    )
    killed_at = time.monotonic()
    production.stack.kill_component(victim, signal.SIGKILL)

    def moved() -> bool:
        tis = [ti for ti in _fleet(production, dag_id, run_id) if ti["state"] == "deferred"]
        owners = {ti["trigger"]["triggerer_id"] for ti in tis if ti["trigger"]}
        alive = {job for job, name in _triggerer_jobs(production).items() if name == survivor}
        return owners <= alive

    # Airflow's threshold (15 s in the HA stack) plus the survivor's next assignment round
    wait(f"every trigger held by {survivor}", moved, timeout=90, interval=0.5)
    print(f"triggers moved to {survivor} {time.monotonic() - killed_at:.1f}s after the kill")
    production.stack.start_component(victim)  # as a deployment restarts it
    run = production.rest.wait_run(dag_id, run_id, timeout=600)
    tis = {ti["task_id"]: ti for ti in _fleet(production, dag_id, run_id)}
    assert run["state"] == "success", {t: ti["state"] for t, ti in tis.items()}
    assert {t: tis[t]["try_number"] for t in tasks} == dict.fromkeys(tasks, 1)
    assert {t: len(_jobs(production, dag_id, run_id, t)) for t in tasks} == dict.fromkeys(tasks, 1)
    logs = {t: _epochs(production, dag_id, run_id, t) for t in tasks}
    wrong = {
        t: Counter(lines) - Counter(FLEET_EXPECTED) or lines
        for t, lines in logs.items()
        if lines != FLEET_EXPECTED
    }
    assert not wrong, (
        f"epoch lines not exactly once (doubled, or the whole list when out of order/lost): {wrong}"
    )


def test_triggerer_killed_across_the_fleet(ha: Production) -> None:
    _kill_a_triggerer_across_the_fleet(ha, "fleet_training", FLEET)


@pytest.mark.slow
def test_triggerer_killed_across_a_larger_fleet(ha: Production) -> None:
    _kill_a_triggerer_across_the_fleet(ha, "fleet_training_large", FLEET_LARGE)


def test_celery_worker_killed_after_create_before_defer(ha: Production) -> None:
    dag_id = "slow_defer_long_training"
    run_id = ha.rest.trigger(dag_id)
    ha.rest.wait_for(
        "the pause between create and defer",
        lambda: any(WINDOW_MARKER in line for line in ha.log_lines(dag_id, run_id, "train", 1)),
        timeout=300,
    )
    assert len(_jobs(ha, dag_id, run_id)) == 1
    ti = ha.rest.task_instance(dag_id, run_id, "train")
    holders = [
        name
        for name in ("worker-1", "worker-2")
        if any(ti["id"] in " ".join(p.cmdline()) for p in _tree(ha, name) if p.is_running())
    ]
    assert len(holders) == 1, f"the task process {ti['id']} is in the trees of {holders}"
    ha.stack.kill_component(holders[0], signal.SIGKILL)  # the worker's host dies
    ha.stack.start_component(holders[0])
    run = ha.rest.wait_run(dag_id, run_id, timeout=400)
    ti = ha.rest.task_instance(dag_id, run_id, "train")
    assert run["state"] == "success" and ti["try_number"] == 2
    assert len(_jobs(ha, dag_id, run_id)) == 1  # adopted, not duplicated
    log = ha.log_lines(dag_id, run_id, "train", 2)
    said = [line for line in log if any(text in line for text in ADOPTED)]
    assert said, f"try 2's log does not say it adopted the Job: {log[-20:]}"
    print(f"try 2: {said[0]}")
    assert epoch_lines(log) == SHORT_EXPECTED


def test_scheduler_killed_mid_run(ha: Production) -> None:
    run_id = ha.rest.trigger("short_training")
    ha.rest.wait_task_state("short_training", run_id, "train", {"deferred"}, timeout=300)
    ha.stack.kill_component("scheduler-1", signal.SIGKILL)
    try:
        run = ha.rest.wait_run("short_training", run_id, timeout=300)
    finally:
        ha.stack.start_component("scheduler-1")
    assert run["state"] == "success"
    assert len(_jobs(ha, "short_training", run_id)) == 1
    assert epoch_lines(ha.log_lines("short_training", run_id, "train", 1)) == SHORT_EXPECTED


def test_deferred_tasks_marked_failed_on_either_triggerer(ha: Production) -> None:
    dag_id = "fleet_training"
    run_id = ha.rest.trigger(dag_id)

    def deferred() -> list[dict[str, Any]] | None:
        tis = [ti for ti in _fleet(ha, dag_id, run_id) if ti["state"] == "deferred" and ti["trigger"]]
        return tis if len(tis) == FLEET else None

    tis = ha.rest.wait_for(f"all {FLEET} tasks deferred", deferred, timeout=400, interval=1)
    jobs = {ti["task_id"]: _jobs(ha, dag_id, run_id, ti["task_id"]) for ti in tis}
    assert all(len(names) == 1 for names in jobs.values()), jobs
    print(f"triggers per triggerer job: {dict(Counter(ti['trigger']['triggerer_id'] for ti in tis))}")
    marked: dict[str, float] = {}
    for ti in tis:
        ha.rest.set_task_state(dag_id, run_id, ti["task_id"], "failed")
        marked[ti["task_id"]] = time.monotonic()

    def gone_in_time() -> bool:
        left = {t for t, names in jobs.items() if _jobs(ha, dag_id, run_id, t)}
        late = [t for t in left if time.monotonic() - marked[t] > 30]
        assert not late, f"Jobs of {late} still there 30 s after their task was marked failed"
        return not left

    ha.rest.wait_for("every marked task's Job deleted", gone_in_time, timeout=60)
    print(f"all {FLEET} Jobs gone {time.monotonic() - min(marked.values()):.1f}s after the first mark")
    assert {ti["state"] for ti in _fleet(ha, dag_id, run_id)} == {"failed"}
