"""Run ``airflow`` CLI commands for tests in an isolated AIRFLOW_HOME with a migrated SQLite database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def migrate(env: dict[str, str]) -> None:
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=180)


def dags_test(env: dict[str, str], dag_id: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRFLOW, "dags", "test", dag_id], env=env, capture_output=True, text=True, timeout=timeout
    )
