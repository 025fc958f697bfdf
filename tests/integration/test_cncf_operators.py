"""Airflow's own KubernetesJobOperator (deferrable) and KubernetesPodOperator, from the cncf provider, run
through ``airflow dags test`` against the local cluster: they succeed, and a failing pod fails them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..airflow_env import airflow_env, dags_test, migrate

DAGS = Path(__file__).parent.parent / "dags"


@pytest.fixture(scope="module")
def env(cluster: ClusterThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("airflow-home")
    environment = airflow_env(home, DAGS, str(cluster.kubeconfig_path))
    migrate(environment)
    yield environment


def _tail(result: object) -> str:
    return (getattr(result, "stdout", "") + getattr(result, "stderr", ""))[-4000:]


def test_stock_job_and_pod_operators_succeed(env: dict[str, str]) -> None:
    result = dags_test(env, "cncf_ok")
    output = result.stdout + result.stderr
    assert result.returncode == 0, _tail(result)
    assert "> successful" in output, _tail(result)  # "Marking run <DagRun cncf_ok ...> successful"
    assert output.count("new_state=success") == 2
    assert "[base] logs: done" in output  # the deferred Job's pod log reached the task log
    assert "[base] done" in output  # the pod operator's streamed log line


@pytest.mark.parametrize("dag_id", ["cncf_job_fails", "cncf_pod_fails"])
def test_a_failing_pod_fails_the_stock_operators(env: dict[str, str], dag_id: str) -> None:
    result = dags_test(env, dag_id)
    output = result.stdout + result.stderr
    assert result.returncode != 0, _tail(result)
    assert "> failed" in output and "new_state=failed" in output, _tail(result)
    assert "boom" in output


def test_kubernetes_decorator_returns_its_value_through_xcom(env: dict[str, str]) -> None:
    """``@task.kubernetes(do_xcom_push=True)``: the provider reads the sidecar's file by pod exec and
    stops the sidecar by exec; the value reaches the downstream task."""
    result = dags_test(env, "cncf_xcom")
    output = result.stdout + result.stderr
    assert result.returncode == 0, _tail(result)
    assert "xcom from the pod: {'answer': 42, 'squares': [0, 1, 4, 9]}" in output, _tail(result)
    assert output.count("new_state=success") == 2, _tail(result)
