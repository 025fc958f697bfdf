"""Static arguments are validated when the DAG file is parsed: each bad value raises ValidationError naming
its field; templated values wait for ``execute`` (tested against the cluster: nothing is created)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators import FineTuneJobOperator, PyTorchJobOperator
from airflow_k8s_ml.sensors import TrainingJobSensor

GOOD: dict[str, Any] = {"task_id": "t", "image": "trainer:1", "command": ["python", "train.py"]}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "x"},
    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"image": None}, "image"),
        ({"image": "trainer 1"}, "image"),
        ({"command": "python train.py"}, "command"),
        ({"args": [1, 2]}, "args[0]"),
        ({"args": "--epochs 3"}, "args"),
        ({"env": {"1BAD": "x"}}, "env[1BAD]"),
        ({"secret_env": {"TOKEN": "no-key"}}, "secret_env[TOKEN]"),
        ({"env_from": ["Not_A_Secret"]}, "env_from[0]"),
        ({"requests": {"memory": "2GB"}}, "requests[memory]"),
        ({"gpus": -1}, "gpus"),
        ({"gpus": 0.5}, "gpus"),
        ({"gpus": 1, "gpu_resource": "cpu"}, "gpu_resource"),
        ({"tolerations": [{"key": "spot", "operator": "Maybe"}]}, "tolerations[0].operator"),
        ({"volumes": [{"name": "data", "mount_path": "/data"}]}, "volumes[0]"),
        ({"service_account": "Bad_SA"}, "service_account"),
        ({"pod_options": {"no_such_field": 1}}, "pod_options.no_such_field"),
        ({"pod_options": {"image": "x"}}, "pod_options.image"),
        ({"namespace": "Bad_NS"}, "namespace"),
        ({"restart_policy": "Always"}, "restart_policy"),
        ({"backoff_limit": -1}, "backoff_limit"),
        ({"active_deadline_seconds": 0}, "active_deadline_seconds"),
        ({"ttl_seconds_after_finished": -5}, "ttl_seconds_after_finished"),
        ({"queue_name": "Bad Queue"}, "queue_name"),
        ({"labels": {"airflow-k8s-ml/task-id": "other"}}, "labels[airflow-k8s-ml/task-id]"),
        ({"pod_options": {"labels": {"airflow-k8s-ml/run-id": "x"}}}, "labels[airflow-k8s-ml/run-id]"),
        ({"on_finish": "purge"}, "on_finish"),
        ({"admission_timeout": 0}, "admission_timeout"),
        ({"run_timeout": "6h"}, "run_timeout"),
        ({"deadline": "soon"}, "deadline"),
        ({"poll_interval": -1}, "poll_interval"),
        ({"resume_from": "latest"}, "resume_from"),
        ({"resume_from": "ftp://host/x"}, "resume_from"),
        ({"checkpoint_uri": "bucket/prefix"}, "checkpoint_uri"),
        ({"checkpoint_uri": "file:///ckpt", "env": {"CHECKPOINT_URI": "x"}}, "env[CHECKPOINT_URI]"),
        ({"kubernetes_conn_id": ""}, "kubernetes_conn_id"),
        ({"manifest": DEPLOYMENT, "image": None, "command": None}, "manifest.kind"),
        ({"manifest": {"apiVersion": "batch/v1", "kind": "Job"}}, "manifest"),
    ],
)
def test_fine_tune_rejects_bad_static_values_at_parse_time(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        FineTuneJobOperator(**{**GOOD, **overrides})
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"workers": -1}, "workers"),
        ({"clean_pod_policy": "Sometimes"}, "clean_pod_policy"),
        ({"nproc_per_node": "many"}, "nproc_per_node"),
        ({"restart_policy": "Maybe"}, "restart_policy"),
        ({"queue_name": "q", "image": None}, "image"),
    ],
)
def test_pytorchjob_rejects_bad_static_values_at_parse_time(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        PyTorchJobOperator(**{**GOOD, **overrides})
    assert info.value.field == field, str(info.value)


def test_pod_options_errors_read_alike_in_every_operator_family() -> None:
    """One rule for ``pod_options``: the same path and wording from a training and a serving operator."""
    from airflow_k8s_ml.operators import InferenceDeploymentOperator

    serving = {"task_id": "s", "image": "server:1", "model_uri": "s3://m/step-1/", "name": "svc"}
    for make in (
        lambda o: FineTuneJobOperator(**GOOD, pod_options=o),
        lambda o: InferenceDeploymentOperator(**serving, pod_options=o),
    ):
        with pytest.raises(ValidationError) as given:
            make({"image": "other:2"})
        assert str(given.value) == "pod_options.image: set by the 'image' argument, not pod_options"
        with pytest.raises(ValidationError) as unknown:
            make({"colour": "red"})
        assert unknown.value.field == "pod_options.colour"
        assert "unknown option; expected one of affinity, annotations," in unknown.value.message


def test_templated_values_are_left_for_execute() -> None:
    op = FineTuneJobOperator(
        task_id="t",
        image="{{ var.value.trainer_image }}",
        command=["python", "train.py", "--run", "{{ run_id }}"],
        args=["--resume-from", "{{ resume_from }}"],
        env={"LR": "{{ params.lr }}"},
        namespace="{{ params.namespace }}",
        resume_from="{{ params.resume }}",
        checkpoint_uri="s3://models/{{ dag.dag_id }}",
        deadline="{{ (logical_date + macros.timedelta(hours=6)).isoformat() }}",
    )
    assert op.image == "{{ var.value.trainer_image }}"  # kept verbatim for Airflow to render


def test_valid_arguments_of_every_kind_are_accepted(tmp_path: Path) -> None:
    FineTuneJobOperator(
        **GOOD,
        gpus=2,
        gpu_resource="nvidia.com/mig-3g.20gb",
        run_timeout=timedelta(hours=6),
        admission_timeout=1800,
        deadline=timedelta(hours=8),
        resume_from="latest",
        checkpoint_uri="s3://models/ft",
        on_finish="delete_on_success",
        queue_name="gpu",
    )
    PyTorchJobOperator(**GOOD, workers=4, nproc_per_node="gpu", clean_pod_policy="All")
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\n"
        "spec: {template: {spec: {restartPolicy: Never, containers: [{name: main, image: 'x:1'}]}}}\n"
    )
    FineTuneJobOperator(task_id="raw", manifest=str(manifest))
    templated = tmp_path / "templated.yaml"
    templated.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: '{{ ds_nodash }}'}\n")
    FineTuneJobOperator(task_id="raw2", manifest=str(templated))  # Jinja inside: checked in execute


def test_manifest_file_problems_name_the_manifest(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cannot read") as info:
        FineTuneJobOperator(task_id="raw", manifest=str(tmp_path / "missing.yaml"))
    assert info.value.field == "manifest"
    with pytest.raises(ValidationError, match="conflicts with image") as info:
        FineTuneJobOperator(task_id="raw", manifest={"kind": "Job"}, image="x:1")
    assert info.value.field == "manifest"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kind": "Pod"}, "kind"),
        ({"name": "Bad_Name"}, "name"),
        ({"namespace": "x y"}, "namespace"),
        ({"run_timeout": -1}, "run_timeout"),
        ({"deadline": "later"}, "deadline"),
        ({"poll_interval": -1}, "poll_interval"),  # the argument written, not the base class's poke_interval
        ({"poll_interval": 0}, "poll_interval"),
        ({"log_lines": -1}, "log_lines"),
    ],
)
def test_sensor_rejects_bad_static_values(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        TrainingJobSensor(**{"task_id": "s", "name": "ft-abc", **overrides})
    assert info.value.field == field


def test_sensor_accepts_templates() -> None:
    TrainingJobSensor(task_id="s", name="{{ ti.xcom_pull('train')['name'] }}", kind="PyTorchJob")
    TrainingJobSensor(
        task_id="s", name="ft", deadline="{{ (logical_date + macros.timedelta(hours=6)).isoformat() }}"
    )


def test_sensor_error_names_poll_interval() -> None:
    with pytest.raises(ValidationError, match="poll_interval") as info:
        TrainingJobSensor(task_id="s", name="ft-abc", poll_interval=-1)
    assert "poke_interval" not in str(info.value)
