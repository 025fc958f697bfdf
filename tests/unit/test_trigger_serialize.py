"""WorkloadTrigger serialisation: every field survives, the classpath resolves, no kubeconfig travels."""

from __future__ import annotations

import importlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.triggers.workload import WorkloadTrigger


def make(**overrides: object) -> WorkloadTrigger:
    kwargs: dict = dict(
        kind="PyTorchJob",
        name="ft-abc-a1",
        namespace="ml",
        uid="1234",
        kubernetes_conn_id="k8s_gpu",
        deadlines={"admission_timeout": 1800, "run_timeout": 21600, "deadline": "2024-05-01T06:00:00+00:00"},
        task_started_at=1_700_000_000.5,
        stream_logs=False,
        log_cursor={"master-0": {"ts": "t", "n": 1}},
        poll_interval=15.0,
        delete_on_kill=False,
    )
    kwargs.update(overrides)
    return WorkloadTrigger(**kwargs)


def test_round_trip() -> None:
    trigger = make()
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_k8s_ml.triggers.workload.WorkloadTrigger"
    module, _, name = classpath.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    json.dumps(kwargs)  # the triggerer stores them as JSON
    again = cls(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert Deadlines.from_payload(kwargs["deadlines"]).admission_timeout == timedelta(minutes=30)
    assert kwargs["kubernetes_conn_id"] == "k8s_gpu" and kwargs["delete_on_kill"] is False


def test_deadlines_parsed_once_travel_through_serialize_and_back() -> None:
    """The operator hands its parsed Deadlines to the trigger; the kwargs carry them as JSON; the
    triggerer's trigger holds the same value."""
    parsed = Deadlines.parse(
        admission_timeout="1800",
        startup_timeout=timedelta(minutes=15),
        run_timeout=7200,
        deadline=datetime(2024, 5, 1, 6, 0),
    )
    classpath, kwargs = make(deadlines=parsed).serialize()
    assert kwargs["deadlines"] == {
        "admission_timeout": 1800.0,
        "startup_timeout": 900.0,
        "run_timeout": 7200.0,
        "deadline": "2024-05-01T06:00:00+00:00",
    }
    revived = WorkloadTrigger(**json.loads(json.dumps(kwargs)))
    assert revived.deadlines == parsed
    assert revived.deadlines.deadline == datetime(2024, 5, 1, 6, 0, tzinfo=UTC)
    assert revived.serialize() == (classpath, kwargs)
    relative = Deadlines.parse(deadline=6 * 3600)
    _, kwargs = make(deadlines=relative).serialize()
    assert WorkloadTrigger(**json.loads(json.dumps(kwargs))).deadlines == relative


def test_no_kubeconfig_contents_in_kwargs(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_K8S_GPU",
        json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config": {"users": [{"user": {"token": "s3cr3t"}}]}}}
        ),
    )
    _, kwargs = make().serialize()
    text = json.dumps(kwargs)
    assert "s3cr3t" not in text and "kube_config" not in text and "token" not in text
    assert set(kwargs) == {
        "kind",
        "name",
        "namespace",
        "uid",
        "kubernetes_conn_id",
        "deadlines",
        "task_started_at",
        "stream_logs",
        "log_cursor",
        "poll_interval",
        "delete_on_kill",
        "api_version",
        "try_number",
        "deferred_at",
    }


def test_defaults_and_deployment_kind() -> None:
    trigger = WorkloadTrigger(kind="Deployment", name="web", namespace="ml", uid="", task_started_at=0)
    _, kwargs = trigger.serialize()
    assert kwargs["kubernetes_conn_id"] == "kubernetes_default"
    assert Deadlines.from_payload(kwargs["deadlines"]).is_empty()
    assert (
        kwargs["stream_logs"] is True and kwargs["delete_on_kill"] is True and kwargs["poll_interval"] == 30.0
    )
    assert trigger.resource.plural == "deployments"


def test_bad_deadlines_fail_at_defer_time() -> None:
    with pytest.raises(ValidationError) as info:
        make(deadlines={"run_timeout": 0})
    assert info.value.field == "run_timeout"


def test_unknown_kind_needs_an_api_version() -> None:
    with pytest.raises(ValidationError):
        make(kind="MPIJob")
