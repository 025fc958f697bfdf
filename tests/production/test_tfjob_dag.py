"""A TFJob under real Airflow components: the ``tf_training`` DAG (two Workers, a PS, no Chief) runs to
success through the scheduler, the LocalExecutor and the triggerer; exactly one TFJob exists for the run,
its parameter server is stopped by the rendered cleanPodPolicy, and the task log, as the UI serves it,
carries each replica's lines with its prefix."""

from __future__ import annotations

from typing import Any

from tests.production.conftest import Production, wait_until


def _tfjobs(production: Production, run_id: str) -> list[dict[str, Any]]:
    from kubernetes import client

    items = client.CustomObjectsApi(production.api).list_namespaced_custom_object(
        "kubeflow.org", "v1", "ml", "tfjobs", label_selector="airflow-k8s-ml/dag-id=tf_training"
    )["items"]
    return [j for j in items if j["metadata"].get("annotations", {}).get("airflow-k8s-ml/run-id") == run_id]


def test_tf_training_dag_succeeds_with_one_tfjob_and_replica_prefixed_logs(production: Production) -> None:
    run_id = production.rest.trigger("tf_training")
    run = production.rest.wait_run("tf_training", run_id, timeout=600)
    ti = production.rest.task_instance("tf_training", run_id, "train")
    lines = production.log_lines("tf_training", run_id, "train", ti["try_number"])
    assert run["state"] == "success", lines[-30:]
    [job] = _tfjobs(production, run_id)
    assert [c["type"] for c in job["status"]["conditions"] if c["status"] == "True"][-1] == "Succeeded"
    assert any("[worker-0] topology complete" in line for line in lines), lines
    assert any("[worker-1] reported to the coordinator" in line for line in lines), lines
    result = production.rest.xcom("tf_training", run_id, "train")
    assert result["kind"] == "TFJob" and result["state"]["reason"] == "TFJobSucceeded"
    name = job["metadata"]["name"]
    wait_until(
        "the parameter server stopped",
        lambda: (
            not production.core()
            .list_namespaced_pod("ml", label_selector=f"training.kubeflow.org/job-name={name}")
            .items
            or all(
                p.status.phase in ("Succeeded", "Failed")
                for p in production.core()
                .list_namespaced_pod("ml", label_selector=f"training.kubeflow.org/job-name={name}")
                .items
            )
        ),
    )
