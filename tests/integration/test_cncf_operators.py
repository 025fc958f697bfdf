"""Airflow's own KubernetesJobOperator (deferrable), KubernetesPodOperator and ``@task.kubernetes``, from
the cncf provider, run through ``airflow dags test`` against the local cluster: they succeed, a failing pod
fails them, and the decorator's value comes back through XCom. The four DAG runs start side by side (each
in an AIRFLOW_HOME of its own) when the first test asks."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..airflow_env import airflow_env, dags_tests_at_once, waited_for

DAGS = Path(__file__).parent.parent / "dags"
DAG_IDS = ("cncf_ok", "cncf_job_fails", "cncf_pod_fails", "cncf_xcom")
RUN_TIMEOUT = 300  # seconds, a run alone


@pytest.fixture(scope="module")
def runs(
    cluster: ClusterThread, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[CompletedProcess[str]]]]:
    envs = {
        dag_id: airflow_env(tmp_path_factory.mktemp(dag_id), DAGS, str(cluster.kubeconfig_path))
        for dag_id in DAG_IDS
    }
    with dags_tests_at_once(envs, timeout=RUN_TIMEOUT) as started:
        yield started


def _tail(result: object) -> str:
    return (getattr(result, "stdout", "") + getattr(result, "stderr", ""))[-4000:]


@waited_for(RUN_TIMEOUT, len(DAG_IDS))
def test_stock_job_and_pod_operators_succeed(runs: dict[str, Future[CompletedProcess[str]]]) -> None:
    result = runs["cncf_ok"].result()  # bounded: each run has its timeout
    output = result.stdout + result.stderr
    assert result.returncode == 0, _tail(result)
    assert "> successful" in output, _tail(result)  # "Marking run <DagRun cncf_ok ...> successful"
    assert output.count("new_state=success") == 2
    assert "[base] logs: done" in output  # the deferred Job's pod log reached the task log
    assert "[base] done" in output  # the pod operator's streamed log line


@waited_for(RUN_TIMEOUT, len(DAG_IDS))
@pytest.mark.parametrize("dag_id", ["cncf_job_fails", "cncf_pod_fails"])
def test_a_failing_pod_fails_the_stock_operators(
    runs: dict[str, Future[CompletedProcess[str]]], dag_id: str
) -> None:
    result = runs[dag_id].result()  # bounded: each run has its timeout
    output = result.stdout + result.stderr
    assert result.returncode != 0, _tail(result)
    assert "> failed" in output and "new_state=failed" in output, _tail(result)
    assert "boom" in output


@waited_for(RUN_TIMEOUT, len(DAG_IDS))
def test_kubernetes_decorator_returns_its_value_through_xcom(
    runs: dict[str, Future[CompletedProcess[str]]],
) -> None:
    """``@task.kubernetes(do_xcom_push=True)``: the provider reads the sidecar's file by pod exec and
    stops the sidecar by exec; the value reaches the downstream task."""
    result = runs["cncf_xcom"].result()  # bounded: each run has its timeout
    output = result.stdout + result.stderr
    assert result.returncode == 0, _tail(result)
    assert "xcom from the pod: {'answer': 42, 'squares': [0, 1, 4, 9]}" in output, _tail(result)
    assert output.count("new_state=success") == 2, _tail(result)
