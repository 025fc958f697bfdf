"""Every example DAG in ``dags/examples/`` runs against the local cluster and the embedded S3, as a newcomer
would run it: ``airflow dags test`` in a fresh AIRFLOW_HOME, the two connections set, the pods' Secret in
the namespace, and for the serving examples a model URI and a batch of input in the bucket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_k8s_ml.testbed.demo import Services, connections, prepare_cluster
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_s3 import LocalS3

from ..airflow_env import airflow_env, dags_test, migrate

EXAMPLES = Path(__file__).resolve().parents[2] / "dags" / "examples"
BUCKET = "examples"

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
def example_env(
    cluster: ClusterThread, local_s3: LocalS3, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    local_s3.create_bucket(BUCKET)
    s3 = local_s3.client()
    s3.put_object(Bucket=BUCKET, Key="batches/part-0.csv", Body=b"1,2\n3,4\n5,6\n")
    s3.put_object(Bucket=BUCKET, Key="models/step-1/weights.json", Body=b"{}")
    services = Services(
        cluster.kubeconfig_path, local_s3.endpoint_url, local_s3.credentials.env(), cluster, local_s3
    )
    prepare_cluster(services)  # namespace "ml" and the Secret s3-credentials in it
    home = tmp_path_factory.mktemp("examples-home")
    env = airflow_env(home, EXAMPLES, extra=connections(services))
    migrate(env)
    yield env


@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_the_example_runs(example_env: dict[str, str], dag_id: str) -> None:
    result = dags_test(example_env, dag_id, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "> successful" in output, output[-6000:]
    assert "Unclosed client session" not in output, output[-6000:]  # aiohttp's, at the interpreter's exit
    for line in EXPECTED[dag_id]:
        assert line in output, f"{line!r} not in the output of {dag_id}:\n{output[-6000:]}"
