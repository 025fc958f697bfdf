"""Every example DAG in ``dags/examples/`` runs against the local cluster and the embedded S3, as a newcomer
would run it: ``airflow dags test`` in a fresh AIRFLOW_HOME, the two connections set, the pods' Secret in
the namespace, and for the serving examples a model URI and a batch of input in the bucket.

Each example runs in an AIRFLOW_HOME of its own, so the module starts them side by side
(:func:`tests.airflow_env.dags_tests_at_once`) when its first test asks; each test reads its own
example's outcome."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from airflow_k8s_ml.testbed.demo import Services, connections, prepare_cluster
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_s3 import LocalS3

from ..airflow_env import airflow_env, dags_tests_at_once, selected_params, waited_for

EXAMPLES = Path(__file__).resolve().parents[2] / "dags" / "examples"
BUCKET = "examples"
RUN_TIMEOUT = 600  # seconds, an example's run alone

#: What each example's task log must show, beyond the run's success: the behaviour it exists to show.
EXPECTED = {
    "example_finetune_job": ["step=3 val_accuracy=0.8 committed s3://examples/finetune/"],
    "example_checkpoint_gate": ["step=2 val_accuracy=0.7 committed", "val_accuracy"],
    "example_pytorchjob": ["[master-0] rank 0 of 2", "[worker-0] rank 1 of 2"],
    "example_trainjob": ["[node-0] node 0 of 2", "[node-1] node 1 of 2"],
    "example_batch_inference_job": ["scored 3 rows with s3://examples/models/step-1/"],
    "example_batch_inference_cronjob": ["scored 3 rows with s3://examples/models/step-1/"],
    "example_inference_deployment": ["example-model"],
    "example_training_sensor": ["epoch 3"],
    "example_checkpoint_sensor": ["step=2 val_accuracy=0.7 committed"],
    "example_task_decorators": [
        "step=3 committed s3://examples/decorated/",
        "[master-0] rank 0 of 2 evaluates s3://examples/decorated/",
        "[node-1] node 1 of 2 calibrates step 3",
        "decorated pipeline done: val_accuracy=0.8 calibrated=3",
    ],
}


def test_every_example_file_is_listed_here() -> None:
    assert sorted(path.stem for path in EXAMPLES.glob("example_*.py")) == sorted(EXPECTED)


@pytest.fixture(scope="module")
def example_services(cluster: ClusterThread, local_s3: LocalS3) -> Services:
    local_s3.create_bucket(BUCKET)
    s3 = local_s3.client()
    s3.put_object(Bucket=BUCKET, Key="batches/part-0.csv", Body=b"1,2\n3,4\n5,6\n")
    s3.put_object(Bucket=BUCKET, Key="models/step-1/weights.json", Body=b"{}")
    services = Services(
        cluster.kubeconfig_path, local_s3.endpoint_url, local_s3.credentials.env(), cluster, local_s3
    )
    prepare_cluster(services)  # namespace "ml" and the Secret s3-credentials in it
    return services


@pytest.fixture(scope="module")
def example_runs(
    example_services: Services, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, Future[CompletedProcess[str]]]]:
    """``airflow dags test`` of each selected example, each in a fresh AIRFLOW_HOME, started in the
    background (the module's teardown waits for every run it started)."""
    envs = {
        dag_id: airflow_env(tmp_path_factory.mktemp(dag_id), EXAMPLES, extra=connections(example_services))
        for dag_id in selected_params(request, "test_the_example_runs", "dag_id")
    }
    with dags_tests_at_once(envs, timeout=RUN_TIMEOUT) as runs:
        yield runs


@waited_for(RUN_TIMEOUT, len(EXPECTED))
@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_the_example_runs(example_runs: dict[str, Future[CompletedProcess[str]]], dag_id: str) -> None:
    result = example_runs[dag_id].result()  # bounded: each run has its timeout
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "> successful" in output, output[-6000:]
    assert "Unclosed client session" not in output, output[-6000:]  # aiohttp's, at the interpreter's exit
    for line in EXPECTED[dag_id]:
        assert line in output, f"{line!r} not in the output of {dag_id}:\n{output[-6000:]}"
