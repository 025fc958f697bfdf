"""Trigger serialization round trip, the typed event, the "newer than" test and the import-light rule."""

from __future__ import annotations

import importlib
import subprocess
import sys
from datetime import timedelta

from airflow_k8s_ml.checkpoints.store import Checkpoint
from airflow_k8s_ml.triggers.checkpoint import CheckpointEvent, CheckpointTrigger


def test_trigger_serialization_round_trip() -> None:
    trigger = CheckpointTrigger(
        base_uri="s3://b/run1",
        newer_than_step=4,
        newer_than_time="2026-01-01T00:00:00+00:00",
        deadline_at="2026-01-01T01:00:00+00:00",
        poke_interval=5,
        verify="full",
        aws_conn_id="my_aws",
    )
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert classpath == "airflow_k8s_ml.triggers.checkpoint.CheckpointTrigger"
    assert kwargs["poke_interval"] == 5.0 and kwargs["aws_conn_id"] == "my_aws"


def test_event_payload_round_trip() -> None:
    event = CheckpointEvent("found", "found it", {"uri": "s3://b/r/step-1/", "step": 1})
    assert CheckpointEvent.from_payload(event.to_payload()) == event


def test_is_newer_than() -> None:
    cp = Checkpoint("s3://b/r/step-5/", 5, True, created_at="2026-01-01T00:00:10.000Z")
    assert cp.is_newer_than()
    assert cp.is_newer_than(step=4) and not cp.is_newer_than(step=5)
    assert cp.is_newer_than(time="2026-01-01T00:00:09Z")
    assert not cp.is_newer_than(time="2026-01-01T00:00:10Z")
    assert not cp.is_newer_than(step=4, time="2026-01-02T00:00:00")
    assert not Checkpoint("u", 6, True).is_newer_than(time="2000-01-01T00:00:00Z")


def test_airflow_modules_do_not_import_boto3_or_kubernetes() -> None:
    code = (
        "import sys\n"
        "import airflow_k8s_ml.checkpoints as c\n"
        "import airflow_k8s_ml.operators.checkpoint, airflow_k8s_ml.sensors.checkpoint\n"
        "c.CheckpointStore, c.CheckpointWriter, c.resolve_resume, c.download_checkpoint\n"
        "roots = ('boto3', 'botocore', 'kubernetes', 'torch')\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in roots]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_sensor_fields_survive_construction() -> None:
    from airflow_k8s_ml.sensors.checkpoint import CheckpointSensor

    sensor = CheckpointSensor(
        task_id="wait",
        base_uri="{{ params.base }}",
        newer_than_step="{{ ti.xcom_pull('x') }}",
        deadline=timedelta(minutes=5),
        poke_interval=1,
    )
    assert sensor.deadline == timedelta(minutes=5) and sensor.deferrable
    assert set(sensor.template_fields) == {"base_uri", "newer_than_step", "newer_than_time"}
