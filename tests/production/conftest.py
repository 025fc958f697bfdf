"""The production-mode tier: real Airflow components (api-server, scheduler, dag-processor, triggerer;
LocalExecutor on SQLite) over the embedded local cluster and S3, started once per test session.

The same machinery as ``make demo`` (``airflow_k8s_ml.testbed.demo`` +
``airflow_k8s_ml.testbed.airflow_stack``): the DAGs
folder holds the shipped nightly DAG and the small fault DAGs of ``tests/production/dags``; runs are
triggered through the REST API with ``logical_date: null`` or with ``airflow dags trigger``. Faults are
real: components are killed with SIGKILL of their whole process tree, tasks are marked failed and cleared
through the REST API. Teardown stops every process tree the tier started.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.testbed import demo
from airflow_k8s_ml.testbed.airflow_stack import AIRFLOW, AirflowStack, StackSettings, port_is_free
from tests.cluster_fixtures import wait_for

REPO = Path(__file__).resolve().parents[2]
TEST_DAGS = Path(__file__).resolve().parent / "dags"


@dataclass
class Production:
    stack: AirflowStack
    services: demo.Services
    api: Any  # kubernetes ApiClient on the embedded cluster

    @property
    def rest(self) -> Any:
        return self.stack.rest

    def batch(self) -> Any:
        from kubernetes import client

        return client.BatchV1Api(self.api)

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api)

    def cli_trigger(self, dag_id: str, conf: str) -> str:
        """``airflow dags trigger`` as documented: a run without a logical date; its run id."""
        before = {r["dag_run_id"] for r in self.rest.runs(dag_id)}
        subprocess.run(
            [AIRFLOW, "dags", "trigger", dag_id, "--conf", conf],
            env=self.stack.env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        new = [r["dag_run_id"] for r in self.rest.runs(dag_id) if r["dag_run_id"] not in before]
        assert len(new) == 1, new
        return str(new[0])

    def log_lines(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[str]:
        """The try's log as the UI shows it; empty while the task instance or its log does not exist yet."""
        from airflow_k8s_ml.testbed.airflow_rest import RestError

        try:
            entries = self.rest.task_log(dag_id, run_id, task_id, try_number)
        except RestError as exc:
            if exc.status == 404:
                return []
            raise
        return [str(e.get("event", "")) for e in entries]


#: The DAGs of every production-tier stack: the shipped nightly DAG, the fault DAGs of tests/production/dags.
DAG_FILES = {
    "nightly_finetune.py": REPO / "dags" / "nightly_finetune.py",
    **{name: TEST_DAGS / name for name in ("fault_training.py", "hostile_logs.py", "tf_training.py")},
    **{name: TEST_DAGS / name for name in ("stuck_pods.py", "fleet_training.py", "hostile_checkpoints.py")},
    "canary_serving.py": TEST_DAGS / "canary_serving.py",
    **{name: TEST_DAGS / name for name in ("nightly_no_retries.py", "pytorch_eviction.py")},
}


@contextmanager
def production_stack(root: Path, dag_ids: tuple[str, ...], **settings: Any) -> Iterator[Production]:
    """The embedded cluster and S3, seeded, under an Airflow stack of ``settings`` (``ha=True``: PostgreSQL,
    Celery, two schedulers and triggerers); ``dag_ids`` parsed and unpaused. Stops every tree it started."""
    dags = root / "dags"
    dags.mkdir()
    for name, source in DAG_FILES.items():
        (dags / name).symlink_to(source)
    from kubernetes import config

    from airflow_k8s_ml.testbed.local_cluster.settings import ImageRule

    with demo.embedded_services(root / "state") as services:
        # The demo's images only (demo.IMAGES: every DAG here uses them), and one image the registry refuses
        # (tests/production/dags/stuck_pods.py), first: rules are read at each pull, first match wins.
        services.cluster.cluster.settings.images.insert(0, ImageRule("unpullable.example/*", allow=False))
        demo.prepare_cluster(services)
        demo.seed(services, root / "seed.log")
        stack_settings = StackSettings(
            home=root / "airflow-home", dags_folder=dags, env=demo.connections(services), **settings
        )
        with AirflowStack(stack_settings) as stack:
            api = config.new_client_from_config(config_file=str(services.kubeconfig))
            try:
                for dag_id in dag_ids:
                    stack.rest.wait_dag(dag_id)
                    stack.rest.set_paused(dag_id, False)
                yield Production(stack, services, api)
            finally:
                api.close()
    if stack.postgres is not None:  # its data directory lives outside the tmp home when run as root
        stack.postgres.remove()
    # Nothing the tier started may outlive it: no process of this Airflow home, no port held.
    assert port_is_free(stack.port), f"port {stack.port} still held after stop"
    assert stack.leftovers() == []


@pytest.fixture(scope="session")
def production(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Production]:
    dag_ids = (
        "nightly_finetune",
        "nightly_finetune_no_retries",
        "pytorch_eviction",
        "short_training",
        "burst_training",
        "slow_defer_training",
        "hostile_logs",
        "tf_training",
        "hostile_checkpoints",
        "canary_serving",
        "canary_rollback",
        "stuck_unschedulable",
        "stuck_image_pull",
    )
    with production_stack(tmp_path_factory.mktemp("production"), dag_ids) as production:
        yield production


def epoch_lines(lines: list[str]) -> list[str]:
    """The training progress lines (``[replica] epoch=K/N ...``) of a task log, as ``epoch=K/N``."""
    found = (re.search(r"^(?:\[[^\]]+\] )?(epoch=\d+/\d+) ", line) for line in lines)
    return [m.group(1) for m in found if m]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium (``tests/production/browser.py``), one per module."""
    from tests.production.browser import chromium

    yield from chromium()


def wait_until(what: str, probe: Any, timeout: float = 120.0, interval: float = 0.2) -> Any:
    """:func:`tests.cluster_fixtures.wait_for` with the awaited thing named first (reads as a sentence)."""
    return wait_for(probe, timeout=timeout, interval=interval, what=what)
