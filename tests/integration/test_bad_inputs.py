"""Bad rendered input refused in ``execute`` before anything is created (issue 12, point 8).

Each case passes DAG parsing (the value is templated), is rendered to something wrong, and ``execute`` must
raise a ``ValidationError`` naming the argument the user wrote having sent no write at all (counted through
the cluster's ``/metrics``: a create-then-delete would leave the namespace empty too), and the namespace
stays empty: no workload, no pod, no serving object. Every workload kind has a case (Job, PyTorchJob,
TrainJob, the batch Job and CronJob, the serving objects). The checkpoint gate's case runs against the
embedded S3 endpoint: an object whose bytes no longer match the checksum S3 stored is a corrupt checkpoint (so
``allow_older`` can pass over it), not a botocore exception. The parse-time halves are in
``tests/unit/test_bad_inputs.py``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

import pytest

from airflow_k8s_ml.checkpoints import CheckpointStore, CheckpointWriter
from airflow_k8s_ml.errors import CheckpointError, ValidationError
from airflow_k8s_ml.operators import (
    BatchInferenceCronJobOperator,
    BatchInferenceJobOperator,
    CheckpointCheckOperator,
    FineTuneJobOperator,
    InferenceDeploymentOperator,
    PyTorchJobOperator,
    TrainJobOperator,
)
from airflow_k8s_ml.testbed.local_s3 import LocalS3
from tests.manifest_samples import CONTAINER, changed
from tests.manifest_samples import JOB as SAMPLE_JOB
from tests.manifest_samples import PYTORCHJOB as SAMPLE_PYTORCHJOB

from .serving_helpers import context
from .training_helpers import make_context
from .write_count import no_write_accepted

#: Templated raw manifests: valid at DAG parse time, wrong once rendered.
JOB = changed(SAMPLE_JOB, f"{CONTAINER}.resources", {"limits": {"nvidia.com/gpu": "{{ params.gpus }}"}})
PYTORCHJOB = SAMPLE_PYTORCHJOB
for role in ("Master", "Worker"):
    PYTORCHJOB = changed(
        PYTORCHJOB,
        f"spec.pytorchReplicaSpecs.{role}.template.spec.containers[0].resources",
        {"requests": {"memory": "{{ params.memory }}"}},
    )


def rendered(manifest: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """What Airflow's templating makes of ``manifest`` when ``old`` renders to ``new``."""
    if isinstance(manifest, dict):
        return {key: rendered(value, old, new) for key, value in manifest.items()}
    if isinstance(manifest, list):
        return [rendered(value, old, new) for value in manifest]
    return new if manifest == old else copy.deepcopy(manifest)


def objects_in(api_client: Any, namespace: str) -> dict[str, list[str]]:
    """Every kind our operators create, by name; a refused input must leave all of them empty."""
    from kubernetes import client

    batch, core, apps = (
        client.BatchV1Api(api_client),
        client.CoreV1Api(api_client),
        client.AppsV1Api(api_client),
    )
    custom = client.CustomObjectsApi(api_client)
    found = {
        "Job": batch.list_namespaced_job(namespace).items,
        "CronJob": batch.list_namespaced_cron_job(namespace).items,
        "Pod": core.list_namespaced_pod(namespace).items,
        "Service": core.list_namespaced_service(namespace).items,
        "Deployment": apps.list_namespaced_deployment(namespace).items,
        "HorizontalPodAutoscaler": client.AutoscalingV2Api(api_client)
        .list_namespaced_horizontal_pod_autoscaler(namespace)
        .items,
        "PodDisruptionBudget": client.PolicyV1Api(api_client)
        .list_namespaced_pod_disruption_budget(namespace)
        .items,
    }
    names = {kind: [item.metadata.name for item in items] for kind, items in found.items()}
    pytorchjobs = custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")
    names["PyTorchJob"] = [item["metadata"]["name"] for item in pytorchjobs["items"]]
    trainjobs = custom.list_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs"
    )
    names["TrainJob"] = [item["metadata"]["name"] for item in trainjobs["items"]]
    return names


def nothing_in(api_client: Any, namespace: str) -> bool:
    return not any(objects_in(api_client, namespace).values())


def refused_in_execute(op: Any, ctx: dict[str, Any]) -> ValidationError:
    """``execute`` raises a ValidationError having sent no write request (not even a refused one)."""
    with no_write_accepted() as sent, pytest.raises(ValidationError) as info:
        op.execute(ctx)
    assert not sent, f"a refused input sent writes: {dict(sent)}"
    return info.value


# -- raw manifests ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("kube_conn")
def test_a_rendered_raw_job_with_half_a_gpu_creates_nothing(api_client: Any, namespace: str) -> None:
    op = FineTuneJobOperator(task_id="raw", namespace=namespace, manifest=JOB)  # templated: passes parsing
    op.manifest = rendered(JOB, "{{ params.gpus }}", "0.5")
    error = refused_in_execute(op, make_context("raw"))
    assert error.field == f"manifest.{CONTAINER}.resources.limits[nvidia.com/gpu]"
    assert error.message == "nvidia.com/gpu must be a whole number (fractional GPUs do not exist), got '0.5'"
    assert nothing_in(api_client, namespace)


@pytest.mark.usefixtures("kube_conn")
def test_a_rendered_raw_pytorchjob_with_a_decimal_byte_unit_creates_nothing(
    api_client: Any, namespace: str
) -> None:
    op = PyTorchJobOperator(task_id="raw", namespace=namespace, manifest=PYTORCHJOB)
    op.manifest = rendered(PYTORCHJOB, "{{ params.memory }}", "2GB")
    error = refused_in_execute(op, make_context("raw"))
    assert error.field == (
        "manifest.spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests[memory]"
    )
    assert error.message.startswith("invalid quantity '2GB': quantities must match the regular expression")
    assert nothing_in(api_client, namespace)


@pytest.mark.usefixtures("kube_conn")
def test_a_rendered_raw_batch_job_with_a_bad_deadline_creates_nothing(
    api_client: Any, namespace: str
) -> None:
    job = rendered(JOB, "{{ params.gpus }}", "1")
    job["spec"]["activeDeadlineSeconds"] = "{{ params.deadline }}"
    op = BatchInferenceJobOperator(
        task_id="raw",
        namespace=namespace,
        manifest=job,
        model_uri="s3://m/step-1/",
        input_uri="s3://d/in/",
        output_uri="s3://d/out/",
    )
    op.manifest = rendered(job, "{{ params.deadline }}", "0")
    error = refused_in_execute(op, make_context("raw"))
    assert error.field == "manifest.spec.activeDeadlineSeconds"
    assert error.message == "must be an integer, got '0'"
    op.manifest = {
        **job,
        "spec": {**job["spec"], "activeDeadlineSeconds": 0},
    }  # render_template_as_native_obj
    error = refused_in_execute(op, make_context("raw"))
    assert error.field == "manifest.spec.activeDeadlineSeconds" and error.message == "must be >= 1, got 0"
    assert nothing_in(api_client, namespace)


TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "raw"},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {
            "image": "python:3.11",
            "command": ["python", "-c", "print(1)"],
            "numNodes": "{{ params.nodes }}",
        },
    },
}


@pytest.mark.usefixtures("kube_conn")
def test_a_rendered_raw_trainjob_with_a_bad_node_count_creates_nothing(
    api_client: Any, namespace: str
) -> None:
    op = TrainJobOperator(task_id="raw", namespace=namespace, manifest=TRAINJOB)
    op.manifest = rendered(TRAINJOB, "{{ params.nodes }}", "0")
    error = refused_in_execute(op, make_context("raw"))
    assert error.field.startswith("manifest.spec.trainer.numNodes"), error
    assert nothing_in(api_client, namespace)


# -- the other arguments ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("kube_conn")
def test_cronjob_with_output_uri_rendered_to_its_input_creates_nothing(
    api_client: Any, namespace: str
) -> None:
    op = BatchInferenceCronJobOperator(
        task_id="batch",
        name="scores",
        namespace=namespace,
        schedule="0 3 * * *",
        model_uri="s3://m/step-1/",
        input_uri="s3://d/batch/",
        output_uri="{{ params.output }}",
        image="python:3.11",
        run_now=True,
    )
    op.output_uri = "s3://d/batch"  # the same prefix, written differently
    error = refused_in_execute(op, context("batch"))
    assert error.field == "output_uri"
    assert error.message == (
        "must differ from input_uri ('s3://d/batch/'): the predictions would be read as input by the next run"
    )
    assert nothing_in(api_client, namespace)


@pytest.mark.usefixtures("kube_conn")
def test_a_templated_smoke_path_is_checked_once_rendered(api_client: Any, namespace: str) -> None:
    op = InferenceDeploymentOperator(
        task_id="deploy",
        name="digits",
        namespace=namespace,
        model_uri="file:///models/step-1/",
        image="python:3.11",
        smoke_path="{{ params.smoke_path }}",  # passes DAG parsing
        autoscaling={"min_replicas": 2, "max_replicas": 3, "target_cpu_utilization": 70},
        requests={"cpu": "100m"},
        pdb_min_available=1,
    )
    op.smoke_path = "predict"  # rendered without its leading slash
    error = refused_in_execute(op, context("deploy"))
    assert error.field == "smoke_path"
    assert error.message == "must be an absolute URL path like '/predict', got 'predict'"
    assert nothing_in(api_client, namespace)


# -- the checkpoint gate ----------------------------------------------------------------------------------


def _rot(local_s3: LocalS3, bucket: str, base: str, uri: str, path: str) -> None:
    """Replace a committed file's bytes (same size) while S3 keeps reporting the original checksum: what
    corruption at rest looks like to a reader. S3 then refuses the bytes on a checksummed GET."""
    store = CheckpointStore(base)
    entry = next(f for f in store.get(uri).files if f.path == path)
    key = f"{uri.split('/', 3)[3]}{entry.storage_key}"
    original = base64.b64encode(bytes.fromhex(entry.sha256)).decode()
    local_s3.client().put_object(
        Bucket=bucket,
        Key=key,
        Body=b"x" * entry.size,
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=original,
    )
    assert hashlib.sha256(b"x" * entry.size).hexdigest() != entry.sha256


def test_full_verify_reports_bytes_s3_refuses_and_allow_older_falls_back(
    s3_bucket: str, local_s3: LocalS3
) -> None:
    base = f"s3://{s3_bucket}/run"
    writer = CheckpointWriter(base)
    files = {"model.pt": b"w" * 512, "config.json": b"{}"}
    writer.commit(1, files, metrics={"val_accuracy": 0.95})
    newest = writer.commit(2, files, metrics={"val_accuracy": 0.97})
    _rot(local_s3, s3_bucket, base, newest, "model.pt")

    # The stored checksum still matches the manifest: only reading the bytes finds the damage.
    assert CheckpointStore(base).verify(newest, mode="checksums") == []
    gate = CheckpointCheckOperator(task_id="gate", base_uri=base, verify="full")
    with pytest.raises(CheckpointError) as info:
        gate.execute({})
    lines = str(info.value).splitlines()
    assert lines[0] == f"the newest checkpoint under {base} is not usable:"
    assert lines[1].startswith(
        f"  - step-2 ({base}/step-2/): model.pt: S3 refused the bytes of {base}/step-2/"
    )
    assert "as not matching its stored checksum" in lines[1]

    older = CheckpointCheckOperator(task_id="gate", base_uri=base, verify="full", allow_older=True).execute(
        {}
    )
    assert older["step"] == 1 and older["uri"] == f"{base}/step-1/"
    assert [skipped["step"] for skipped in older["skipped_newer"]] == [2]
    assert "allow_older=True: gated step-1 instead of newer unusable step-2" in older["note"]
