"""The stock cncf.kubernetes operators against the local cluster: proof that Airflow's own provider works
unchanged on it. Used by tests/integration/test_cncf_operators.py through ``airflow dags test``."""

from __future__ import annotations

import pendulum
from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk import DAG, task

START = pendulum.datetime(2026, 1, 1, tz="UTC")
OK = "import time; [print('step', i, flush=True) or time.sleep(0.2) for i in range(3)]; print('done')"
FAIL = "import sys; print('boom', flush=True); sys.exit(3)"


def _job(task_id: str, code: str) -> KubernetesJobOperator:
    return KubernetesJobOperator(
        task_id=task_id,
        name=task_id.replace("_", "-"),
        namespace="default",
        image="python:3.11-slim",
        cmds=["python", "-c", code],
        deferrable=True,
        wait_until_job_complete=True,
        get_logs=True,
        backoff_limit=0,
        job_poll_interval=1,
        kubernetes_conn_id="kubernetes_default",
    )


def _pod(task_id: str, code: str) -> KubernetesPodOperator:
    return KubernetesPodOperator(
        task_id=task_id,
        name=task_id.replace("_", "-"),
        namespace="default",
        image="python:3.11-slim",
        cmds=["python", "-c", code],
        get_logs=True,
        on_finish_action="delete_pod",
        kubernetes_conn_id="kubernetes_default",
        startup_timeout_seconds=60,
    )


with DAG("cncf_ok", schedule=None, start_date=START, catchup=False):
    _job("job_ok", OK) >> _pod("pod_ok", OK)

with DAG("cncf_job_fails", schedule=None, start_date=START, catchup=False):
    _job("job_fails", FAIL)

with DAG("cncf_pod_fails", schedule=None, start_date=START, catchup=False):
    _pod("pod_fails", FAIL)

with DAG("cncf_xcom", schedule=None, start_date=START, catchup=False):
    # The cncf provider's decorator with do_xcom_push: its pod gets the alpine XCom sidecar and a shared
    # emptyDir at /airflow/xcom; the provider reads return.json by pod exec and stops the sidecar by exec.
    @task.kubernetes(
        image="python:3.11-slim",
        namespace="default",
        do_xcom_push=True,
        get_logs=True,
        on_finish_action="delete_pod",
        kubernetes_conn_id="kubernetes_default",
        startup_timeout_seconds=60,
    )
    def compute() -> dict[str, object]:
        return {"answer": 42, "squares": [i * i for i in range(4)]}

    @task
    def report(value: dict[str, object]) -> None:
        print(f"xcom from the pod: {value!r}")

    report(compute())
