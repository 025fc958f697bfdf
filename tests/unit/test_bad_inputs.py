"""Bad input refused at DAG parse time, with an error naming the argument the user wrote (issue 12, point 8).

Raw manifests go through the typed arguments' quantity, GPU, name and deadline rules; the other cases each
had one argument that slipped through or was named wrongly. The execute-time halves (rendered values,
nothing created on the cluster) are in ``tests/integration/test_bad_inputs.py``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_k8s_ml.errors import CheckpointError, ValidationError
from airflow_k8s_ml.operators import (
    BatchInferenceCronJobOperator,
    BatchInferenceJobOperator,
    CheckpointCheckOperator,
    FineTuneJobOperator,
    InferenceDeploymentOperator,
    PyTorchJobOperator,
)
from airflow_k8s_ml.sensors import CheckpointSensor
from tests.manifest_samples import CONTAINER, JOB, PYTORCHJOB, changed

URIS = {"model_uri": "s3://m/step-1/", "input_uri": "s3://d/in/", "output_uri": "s3://d/out/"}


def refused(build: Any) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        build()
    return info.value


# -- raw manifests: the typed arguments' rules --------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "base", "path", "value", "field", "says"),
    [
        (
            FineTuneJobOperator,
            JOB,
            f"{CONTAINER}.resources.limits",
            {"nvidia.com/gpu": "0.5"},
            f"manifest.{CONTAINER}.resources.limits[nvidia.com/gpu]",
            "nvidia.com/gpu must be a whole number (fractional GPUs do not exist), got '0.5'",
        ),
        (
            FineTuneJobOperator,
            JOB,
            f"{CONTAINER}.resources.requests",
            {"memory": "2GB"},
            f"manifest.{CONTAINER}.resources.requests[memory]",
            "invalid quantity '2GB'",
        ),
        (
            FineTuneJobOperator,
            JOB,
            f"{CONTAINER}.resources",
            {"requests": {"nvidia.com/gpu": 1}},
            f"manifest.{CONTAINER}.resources.requests[nvidia.com/gpu]",
            "must be equal to nvidia.com/gpu limit of 0",
        ),
        (
            FineTuneJobOperator,
            JOB,
            f"{CONTAINER}.resources",
            {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
            f"manifest.{CONTAINER}.resources.requests[cpu]",
            "must be less than or equal to cpu limit of 1",
        ),
        (
            FineTuneJobOperator,
            JOB,
            f"{CONTAINER}.name",
            "Main_Container",
            f"manifest.{CONTAINER}.name",
            "invalid name 'Main_Container'",
        ),
        (
            FineTuneJobOperator,
            JOB,
            f"{CONTAINER}.image",
            "python 3.11",
            f"manifest.{CONTAINER}.image",
            "must not contain whitespace",
        ),
        (
            FineTuneJobOperator,
            JOB,
            "spec.activeDeadlineSeconds",
            0,
            "manifest.spec.activeDeadlineSeconds",
            "must be >= 1, got 0",
        ),
        (
            FineTuneJobOperator,
            JOB,
            "spec.backoffLimit",
            -1,
            "manifest.spec.backoffLimit",
            "must be >= 0, got -1",
        ),
        (
            FineTuneJobOperator,
            JOB,
            "spec.ttlSecondsAfterFinished",
            "1h",
            "manifest.spec.ttlSecondsAfterFinished",
            "must be an integer",
        ),
        (
            FineTuneJobOperator,
            JOB,
            "spec.template.spec.serviceAccountName",
            "Bad_SA",
            "manifest.spec.template.spec.serviceAccountName",
            "invalid name 'Bad_SA'",
        ),
        (
            FineTuneJobOperator,
            JOB,
            "spec.template.spec.restartPolicy",
            "Always",
            "manifest.spec.template.spec.restartPolicy",
            "must be one of Never, OnFailure; got 'Always'",
        ),
        (
            PyTorchJobOperator,
            PYTORCHJOB,
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits",
            {"nvidia.com/gpu": "0.5"},
            "manifest.spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits"
            "[nvidia.com/gpu]",
            "must be a whole number",
        ),
        (
            PyTorchJobOperator,
            PYTORCHJOB,
            "spec.runPolicy.activeDeadlineSeconds",
            -5,
            "manifest.spec.runPolicy.activeDeadlineSeconds",
            "must be >= 1, got -5",
        ),
        (
            PyTorchJobOperator,
            PYTORCHJOB,
            "spec.runPolicy.cleanPodPolicy",
            "Sometimes",
            "manifest.spec.runPolicy.cleanPodPolicy",
            "must be one of All, None, Running",
        ),
        (
            PyTorchJobOperator,
            PYTORCHJOB,
            "spec.pytorchReplicaSpecs.Worker.replicas",
            -1,
            "manifest.spec.pytorchReplicaSpecs.Worker.replicas",
            ">= 0",
        ),
        (
            PyTorchJobOperator,
            PYTORCHJOB,
            "spec.pytorchReplicaSpecs.Worker.restartPolicy",
            "Maybe",
            "manifest.spec.pytorchReplicaSpecs.Worker.restartPolicy",
            "must be one of",
        ),
    ],
)
def test_a_raw_manifest_fails_the_dag_import_naming_manifest_and_the_path(
    operator: type, base: dict[str, Any], path: str, value: Any, field: str, says: str
) -> None:
    error = refused(lambda: operator(task_id="raw", manifest=changed(base, path, value)))
    assert error.field == field
    assert says in error.message


def test_a_raw_batch_job_and_a_yaml_manifest_are_judged_alike(tmp_path: Path) -> None:
    bad = changed(JOB, f"{CONTAINER}.resources", {"requests": {"memory": "2GB"}})
    error = refused(lambda: BatchInferenceJobOperator(task_id="raw", manifest=bad, **URIS))
    assert error.field == f"manifest.{CONTAINER}.resources.requests[memory]"
    import yaml

    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(changed(JOB, f"{CONTAINER}.resources", {"limits": {"nvidia.com/gpu": "0.5"}}))
    )
    error = refused(lambda: FineTuneJobOperator(task_id="raw", manifest=str(path)))
    assert error.field == f"manifest.{CONTAINER}.resources.limits[nvidia.com/gpu]"


def test_templated_values_in_a_raw_manifest_are_judged_once_rendered() -> None:
    """A placeholder is no quantity: judging it at parse time would fail a valid DAG."""
    templated = changed(JOB, f"{CONTAINER}.resources", {"limits": {"nvidia.com/gpu": "{{ params.gpus }}"}})
    templated = changed(templated, "spec.activeDeadlineSeconds", "{{ params.deadline }}")
    FineTuneJobOperator(task_id="raw", manifest=templated)
    good = changed(JOB, f"{CONTAINER}.resources", {"limits": {"nvidia.com/gpu": 2, "memory": "2Gi"}})
    FineTuneJobOperator(task_id="raw2", manifest=changed(good, "spec.activeDeadlineSeconds", 3600))


# -- the other arguments ---------------------------------------------------------------------------------


def cronjob(**overrides: Any) -> BatchInferenceCronJobOperator:
    args = {"task_id": "batch", "name": "scores", "schedule": "0 3 * * *", "image": "python:3.11", **URIS}
    return BatchInferenceCronJobOperator(**{**args, **overrides})


def test_cronjob_refuses_output_uri_equal_to_input_uri_like_its_job_twin() -> None:
    same = {"input_uri": "s3://d/batch/", "output_uri": "s3://d/batch"}
    for build in (
        lambda: cronjob(**same),
        lambda: BatchInferenceJobOperator(task_id="job", **{**URIS, **same}),
    ):
        error = refused(build)
        assert error.field == "output_uri"
        assert error.message == (
            "must differ from input_uri ('s3://d/batch/'): "
            "the predictions would be read as input by the next run"
        )
    cronjob(output_uri="s3://d/out/{{ ds_nodash }}/")  # templated: checked once rendered


def deploy(**overrides: Any) -> InferenceDeploymentOperator:
    args = {"task_id": "deploy", "name": "digits", "model_uri": "s3://m/step-1/", "image": "python:3.11"}
    return InferenceDeploymentOperator(**{**args, **overrides})


def test_templated_smoke_arguments_do_not_fail_the_dag_import() -> None:
    with DAG("smoke", schedule=None):
        op = deploy(smoke_path="{{ params.p }}", expected_response=["{{ params.path }}", "$.predictions"])
    assert op.smoke_path == "{{ params.p }}"  # kept for Airflow to render; checked in execute
    error = refused(lambda: deploy(smoke_path="predict"))
    assert error.field == "smoke_path" and "must be an absolute URL path" in error.message


@pytest.mark.parametrize(
    ("options", "field", "says"),
    [
        ({"max_surge": "150%"}, "deployment_options.max_surge", "must be an integer or a percentage"),
        ({"max_surge": -1}, "deployment_options.max_surge", "must be >= 0"),
        ({"max_surge": 0, "max_unavailable": 0}, "deployment_options.max_unavailable", "may not be 0"),
        ({"progress_deadline_seconds": 0}, "deployment_options.progress_deadline_seconds", "must be >= 1"),
    ],
)
def test_deployment_option_errors_name_deployment_options(
    options: dict[str, Any], field: str, says: str
) -> None:
    error = refused(lambda: deploy(deployment_options=options))
    assert error.field == field and says in error.message


def test_checkpoint_sensor_refuses_a_deadline_that_is_not_positive() -> None:
    for deadline in (timedelta(seconds=-30), timedelta(0)):
        error = refused(
            lambda d=deadline: CheckpointSensor(task_id="wait", base_uri="s3://b/run", deadline=d)
        )
        assert error.field == "deadline" and error.message.startswith("must be a positive duration, got ")
    CheckpointSensor(task_id="ok", base_uri="s3://b/run", deadline=timedelta(minutes=5))


def test_checkpoint_gate_refuses_allow_older_that_is_not_a_bool() -> None:
    error = refused(lambda: CheckpointCheckOperator(task_id="gate", base_uri="s3://b/run", allow_older="yes"))
    assert error.field == "allow_older" and error.message == "must be true or false, got 'yes'"


def test_an_empty_checkpoint_base_says_what_was_found(tmp_path: Path) -> None:
    for base in (tmp_path, tmp_path / "missing"):
        gate = CheckpointCheckOperator(task_id="gate", base_uri=f"file://{base}")
        with pytest.raises(CheckpointError) as info:
            gate.execute({})
        first_line = str(info.value).splitlines()[0]
        assert first_line == (
            f"no complete checkpoint under file://{base}: no step-<N> folders there "
            "(the base is empty or does not exist)"
        )
    (tmp_path / "step-1").mkdir()
    with pytest.raises(CheckpointError) as info:
        CheckpointCheckOperator(task_id="gate", base_uri=f"file://{tmp_path}").execute({})
    lines = str(info.value).splitlines()
    assert lines[0] == f"no complete checkpoint under file://{tmp_path}: found 1 step folder, none complete:"
    assert lines[1].startswith(f"  - step-1 (file://{tmp_path}/step-1/): no MANIFEST.json")
