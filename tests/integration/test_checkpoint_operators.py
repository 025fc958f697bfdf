"""The checkpoint gate, the sensor and its trigger executed for real against the embedded S3 endpoint.

Airflow reaches the endpoint through ``AIRFLOW_CONN_AWS_DEFAULT`` (JSON with ``extra.endpoint_url``); training
side writes go through ``CheckpointWriter`` with the pod-style environment. ``execute`` is called with a
minimal context, and the deferral is followed by running the trigger the operator handed over.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowSensorTimeout, TaskDeferred

from airflow_k8s_ml.checkpoints import CheckpointWriter
from airflow_k8s_ml.errors import CheckpointError, MetricGateFailed
from airflow_k8s_ml.operators.checkpoint import CheckpointCheckOperator
from airflow_k8s_ml.sensors.checkpoint import CheckpointSensor
from airflow_k8s_ml.testbed.local_s3 import LocalS3
from airflow_k8s_ml.triggers.checkpoint import CheckpointTrigger

RULES = {"val_accuracy": ">= 0.90", "loss": "< 0.5"}


def _commit(base: str, step: int, **metrics: float) -> str:
    return CheckpointWriter(base).commit(
        step, {"model.pt": b"w" * 512, "config.json": b"{}"}, metrics=metrics
    )


async def _first_event(trigger: CheckpointTrigger, timeout: float = 10) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("trigger ended without an event")

    return await asyncio.wait_for(first(), timeout)


def test_gate_passes_and_pushes_the_checkpoint(s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/run"
    _commit(base, 1, val_accuracy=0.5, loss=0.9)
    _commit(base, 2, val_accuracy=0.95, loss=0.1)
    result = CheckpointCheckOperator(task_id="gate", base_uri=base, metric_rules=RULES).execute({})
    assert result["uri"] == f"{base}/step-2/" and result["step"] == 2
    assert result["metrics"] == {"val_accuracy": 0.95, "loss": 0.1} and result["created_at"]
    assert set(result) == {"uri", "step", "metrics", "created_at"}


def test_gate_failure_lists_every_failed_rule(s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/run"
    _commit(base, 3, val_accuracy=0.85)
    with pytest.raises(MetricGateFailed) as info:
        CheckpointCheckOperator(task_id="gate", base_uri=base, metric_rules=RULES, verify="full").execute({})
    assert str(info.value).splitlines() == [
        f"checkpoint step-3 ({base}/step-3/) failed 2 of 2 metric rules:",
        "  - val_accuracy >= 0.9: got 0.85",
        "  - loss < 0.5: metric missing (checkpoint has: val_accuracy)",
    ]


def test_newer_corrupt_checkpoint_blocks_the_gate_unless_allow_older(
    s3_bucket: str, local_s3: LocalS3, capfd: pytest.CaptureFixture[str]
) -> None:
    base = f"s3://{s3_bucket}/run"
    _commit(base, 1, val_accuracy=0.95, loss=0.1)
    uri = _commit(base, 2, val_accuracy=0.99, loss=0.05)
    raw = local_s3.client()
    model_key = next(
        o["Key"]
        for o in raw.list_objects_v2(Bucket=s3_bucket, Prefix="run/step-2/")["Contents"]
        if o["Key"].endswith("model.pt")
    )
    raw.put_object(Bucket=s3_bucket, Key=model_key, Body=b"x" * 512, ChecksumAlgorithm="SHA256")

    with pytest.raises(CheckpointError) as info:
        CheckpointCheckOperator(task_id="gate", base_uri=base, metric_rules=RULES).execute({})
    message = str(info.value)
    assert f"step-2 ({uri}): model.pt: stored SHA-256" in message
    assert "newest complete is step-1" in message and "allow_older=True" in message

    op = CheckpointCheckOperator(task_id="gate", base_uri=base, metric_rules=RULES, allow_older=True)
    result = op.execute({})
    assert result["step"] == 1
    assert (
        result["skipped_newer"][0]["step"] == 2 and "stored SHA-256" in result["skipped_newer"][0]["problem"]
    )
    assert "allow_older=True: gated step-1 instead of newer unusable step-2" in result["note"]
    assert "gated step-1 instead of newer unusable step-2" in capfd.readouterr().out  # the task log


def test_gate_without_any_checkpoint(s3_bucket: str, local_s3: LocalS3) -> None:
    base = f"s3://{s3_bucket}/run"
    local_s3.client().put_object(Bucket=s3_bucket, Key="run/step-1/data-x/model.pt", Body=b"partial")
    expected = r"no complete checkpoint under .*: found 1 step folder, none complete:\n  - step-1 .*MANIFEST"
    with pytest.raises(CheckpointError, match=expected):
        CheckpointCheckOperator(task_id="gate", base_uri=base, metric_rules=RULES).execute({})


def test_sensor_defers_and_its_trigger_fires_when_a_newer_checkpoint_appears(s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/run"
    _commit(base, 1, loss=0.5)
    sensor = CheckpointSensor(
        task_id="wait", base_uri=base, newer_than_step=1, deadline=timedelta(seconds=30), poke_interval=0.1
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, CheckpointTrigger)
    _classpath, kwargs = trigger.serialize()
    assert kwargs["newer_than_step"] == 1 and kwargs["deadline_at"]
    revived = CheckpointTrigger(**kwargs)  # what the triggerer does with the serialized form

    writer = threading.Timer(0.4, _commit, args=(base, 2), kwargs={"loss": 0.3})
    writer.start()
    try:
        payload = asyncio.run(_first_event(revived))
    finally:
        writer.join()
    assert payload["status"] == "found"
    result = sensor.execute_complete({}, payload)
    assert result["uri"] == f"{base}/step-2/" and result["metrics"] == {"loss": 0.3}


def test_sensor_returns_at_once_when_already_satisfied(s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/run"
    _commit(base, 4, loss=0.2)
    before = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    sensor = CheckpointSensor(task_id="wait", base_uri=base, newer_than_time=before, poke_interval=0.1)
    assert sensor.execute({})["step"] == 4


def test_sensor_deadline_fails_with_a_clear_message(s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/run"
    _commit(base, 3, loss=0.2)
    sensor = CheckpointSensor(
        task_id="wait", base_uri=base, newer_than_step=3, deadline=timedelta(seconds=3), poke_interval=0.1
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    started = time.monotonic()
    payload = asyncio.run(_first_event(deferred.value.trigger))
    took = time.monotonic() - started
    assert payload["status"] == "deadline", payload
    assert took < 60, f"a 3 s deadline reported after {took:.1f} s (a hang)"
    with pytest.raises(AirflowSensorTimeout) as info:
        sensor.execute_complete({}, payload)
    message = str(info.value)
    assert f"without a complete checkpoint under {base} with step > 3" in message
    assert f"newest complete: step 3 ({base}/step-3/)" in message


def test_sensor_in_poke_mode_honours_the_deadline(s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/run"
    sensor = CheckpointSensor(
        task_id="wait",
        base_uri=base,
        deferrable=False,
        deadline=timedelta(seconds=0.3),
        poke_interval=0.1,
    )
    with pytest.raises(AirflowSensorTimeout, match="none complete yet"):
        sensor.execute({})
    _commit(base, 1, loss=0.2)
    assert (
        CheckpointSensor(task_id="wait", base_uri=base, deferrable=False, poke_interval=0.1).execute({})[
            "step"
        ]
        == 1
    )
