"""Run ``airflow`` CLI commands for tests in an isolated AIRFLOW_HOME with a migrated SQLite database."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def airflow_env(
    home: Path, dags_folder: Path, kubeconfig: str | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if kubeconfig:
        env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig, "namespace": "default"}}
        )
    env.update(extra or {})
    return env


_template_lock = threading.Lock()
_template: list[Path] = []


def _migrated_template() -> Path:
    """The SQLite file of one ``airflow db migrate`` run once per test process in a home of its own.

    A freshly migrated database holds no path of its home (the alembic version, the log templates, the
    default pool), so every later home can start from a copy of it instead of its own migration (one
    Airflow CLI start-up and a few hundred DDL statements, 5-15 s on a loaded machine)."""
    with _template_lock:
        if not _template:
            home = Path(tempfile.mkdtemp(prefix="airflow-db-template-"))
            atexit.register(shutil.rmtree, home, ignore_errors=True)
            subprocess.run(
                [AIRFLOW, "db", "migrate"],
                env=airflow_env(home, home / "dags"),
                check=True,
                capture_output=True,
                timeout=180,
            )
            _template.append(home / "airflow.db")
        return _template[0]


def migrate(env: dict[str, str]) -> None:
    """The database of ``env``'s AIRFLOW_HOME as ``airflow db migrate`` leaves it: a copy of the process's
    migrated template when ``env`` uses the default SQLite file, else the command itself."""
    home = Path(env["AIRFLOW_HOME"])
    if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in env or (home / "airflow.db").exists():
        subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=180)
        return
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_migrated_template(), home / "airflow.db")


def dags_test(env: dict[str, str], dag_id: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRFLOW, "dags", "test", dag_id], env=env, capture_output=True, text=True, timeout=timeout
    )


#: How many ``airflow dags test`` runs :func:`dags_tests_at_once` keeps going together
#: (``AIRFLOW_K8S_ML_DAG_TESTS_AT_ONCE``; 1 runs them one after another). Two, as CI has two cores.
AT_ONCE = int(os.environ.get("AIRFLOW_K8S_ML_DAG_TESTS_AT_ONCE", "2"))


@contextmanager
def dags_tests_at_once(
    envs: Mapping[str, dict[str, str]], timeout: float = 300, at_once: int = AT_ONCE
) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """``airflow dags test`` of each DAG id in its own environment (each an AIRFLOW_HOME of its own,
    migrated here), ``at_once`` at a time, in the background; leaving waits for every run started.

    Much of a DAG run against the local cluster is waiting (pods starting, the operators' polls), which
    another DAG's run fills; separate homes keep the SQLite databases apart. ``timeout`` bounds a run as
    if it ran alone: on a machine whose CPU is already taken, runs side by side each take up to
    ``at_once`` times longer, so each is given that much."""
    at_once = max(1, at_once)

    def run(dag_id: str) -> subprocess.CompletedProcess[str]:
        migrate(envs[dag_id])
        return dags_test(envs[dag_id], dag_id, timeout=timeout * at_once)

    with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="dags-test") as pool:
        yield {dag_id: pool.submit(run, dag_id) for dag_id in envs}


def selected_params(request: pytest.FixtureRequest, test_name: str, param: str) -> list[str]:
    """The values of ``param`` for which ``test_name`` of the requesting module is selected in this
    session (so a module fixture runs only what ``-k`` or a node id kept)."""
    return [
        item.callspec.params[param]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and item.originalname == test_name
    ]


def waited_for(timeout: float, runs: int) -> pytest.MarkDecorator:
    """A pytest timeout for a test that waits on one of ``runs`` runs of :func:`dags_tests_at_once`, each
    bounded by ``timeout``: its run may start only after the ones before it end."""
    return pytest.mark.timeout(timeout * max(1, AT_ONCE) * -(-runs // max(1, AT_ONCE)) + 60)
