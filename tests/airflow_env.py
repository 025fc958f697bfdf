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
from pathlib import Path

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def airflow_env(home: Path, dags_folder: Path, kubeconfig: str | None = None,
                extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    })
    if kubeconfig:
        env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig, "namespace": "default"}})
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
                [AIRFLOW, "db", "migrate"], env=airflow_env(home, home / "dags"), check=True,
                capture_output=True, timeout=180,
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
    return subprocess.run([AIRFLOW, "dags", "test", dag_id], env=env, capture_output=True, text=True,
                          timeout=timeout)
