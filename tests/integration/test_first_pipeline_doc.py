"""docs/first-pipeline.md, run as written: its DAG block is the DAG file, its command-line blocks run in
bash against the local cluster and the embedded S3 (the real-cluster block with the local cluster's
kubeconfig and the embedded S3's keys in the variables it reads), and the install block's commands exist
with the options it uses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_k8s_ml.testbed.demo import Services, connections, prepare_cluster
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_s3 import LocalS3

from ..airflow_env import airflow_env
from ..cluster_fixtures import fast_settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "first-pipeline.md"
VENV = Path(sys.executable).parent.parent


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture()
def workdir(tmp_path: Path, local_s3: LocalS3) -> Path:
    """Where a reader stands: ``.venv`` (this interpreter's), ``my_dags/`` holding the page's DAG."""
    (tmp_path / ".venv").symlink_to(VENV)
    (tmp_path / "my_dags").mkdir()
    (dag,) = blocks("python")
    (tmp_path / "my_dags" / "my_first_pipeline.py").write_text(dag)
    local_s3.create_bucket("examples")
    return tmp_path


@pytest.fixture()
def fresh_cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(fast_settings(tmp_path / "cluster")) as running:
        yield running


def bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_install_blocks_commands_take_the_options_it_uses(workdir: Path) -> None:
    install = blocks("bash")[0]
    assert "standalone --dags-folder" in install
    shown = bash(".venv/bin/airflow-k8s-ml standalone --help", workdir, dict(os.environ))
    assert "--dags-folder" in shown.stdout, shown.stderr


def test_the_command_line_run_succeeds(
    workdir: Path, fresh_cluster: ClusterThread, local_s3: LocalS3
) -> None:
    """Step 3 with the connections and namespace ``standalone`` sets up."""
    services = Services(
        fresh_cluster.kubeconfig_path,
        local_s3.endpoint_url,
        local_s3.credentials.env(),
        fresh_cluster,
        local_s3,
    )
    prepare_cluster(services)
    env = airflow_env(workdir / "home", workdir / "my_dags", extra=connections(services))
    run = bash(blocks("bash")[1], workdir, env)
    output = run.stdout + run.stderr
    assert run.returncode == 0 and "state=success" in output, output[-6000:]
    assert "first pipeline: step 3 committed" in output


def test_the_real_cluster_block_runs_against_the_local_cluster(
    workdir: Path, fresh_cluster: ClusterThread, local_s3: LocalS3
) -> None:
    """Step 4 from an empty cluster: the namespace, the Secret, the connections from the variables."""
    env = airflow_env(workdir / "home", workdir / "my_dags")
    env.update(local_s3.credentials.env())
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    env["KUBECONFIG"] = str(fresh_cluster.kubeconfig_path)
    run = bash(".venv/bin/airflow db migrate >/dev/null\n" + blocks("bash")[2], workdir, env)
    output = run.stdout + run.stderr
    assert run.returncode == 0 and "state=success" in output, output[-6000:]
