"""A workload kind is a value handed to the one runner: a new operator sets ``workload`` and its own
arguments and overrides nothing (what ``docs/contributing.md`` "Adding a workload kind" promises)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.operators import BatchInferenceJobOperator, FineTuneJobOperator, PyTorchJobOperator
from airflow_k8s_ml.operators._kind import Placement, WorkloadArgs, WorkloadKind
from airflow_k8s_ml.operators._workload import _WorkloadOperator
from airflow_k8s_ml.operators.training import check_pod

KEY = RunKey("dag", "toy", "manual__1")


class ToyArguments(Record):
    colour: str = "red"


def check_toy(args: WorkloadArgs[ToyArguments], injected_env: Mapping[str, str]) -> None:
    check_pod(args, injected_env)
    if args.own.colour not in ("red", "blue", "templated"):
        raise ValidationError("colour", f"must be red or blue, got {args.own.colour!r}")


def render_toy(args: WorkloadArgs[ToyArguments], placement: Placement) -> dict[str, Any]:
    return {
        "apiVersion": "example.org/v1",
        "kind": "Toy",
        "metadata": {"name": placement.name, "namespace": placement.namespace},
        "spec": {"colour": args.own.colour, "image": args.pod["image"], "env": dict(placement.env)},
    }


TOY = WorkloadKind(
    kind="Toy",
    api_version="example.org/v1",
    arguments=ToyArguments,
    check_spec=check_toy,
    render=render_toy,
    env=lambda args: {"COLOUR": args.own.colour},
    result=lambda args, result: {**result, "colour": args.own.colour},
)


class ToyOperator(_WorkloadOperator):
    """A thin operator: the kind value and its signature (its own argument and the shared ones), nothing
    overridden."""

    workload = TOY
    template_fields = (*_WorkloadOperator.template_fields, "colour")

    def __init__(
        self,
        *,
        colour: str = "red",
        image: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str | int | float] | None = None,
        secret_env: Mapping[str, str] | None = None,
        env_from: Sequence[str] | None = None,
        requests: Mapping[str, str | int | float] | None = None,
        limits: Mapping[str, str | int | float] | None = None,
        gpus: int | None = None,
        gpu_resource: str | None = None,
        node_selector: Mapping[str, str] | None = None,
        tolerations: Sequence[Mapping[str, Any]] | None = None,
        image_pull_secrets: Sequence[str] | None = None,
        volumes: Sequence[Mapping[str, Any]] | None = None,
        shm_size: str | None = None,
        service_account: str | None = None,
        scheduler_name: str | None = None,
        pod_security_context: Mapping[str, Any] | None = None,
        container_security_context: Mapping[str, Any] | None = None,
        pod_options: Mapping[str, Any] | None = None,
        queue_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        active_deadline_seconds: int | None = None,
        ttl_seconds_after_finished: int | None = None,
        gang_scheduler: str | None = None,
        disruption_budget: bool = False,
        manifest: Mapping[str, Any] | str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        resume_from: str | None = None,
        checkpoint_uri: str | None = None,
        aws_conn_id: str | None = "aws_default",
        admission_timeout: timedelta | float | str | None = None,
        startup_timeout: timedelta | float | str | None = None,
        run_timeout: timedelta | float | str | None = None,
        deadline: timedelta | datetime | str | None = None,
        on_finish: str = "keep",
        deferrable: bool = True,
        poll_interval: float = 30.0,
        stream_logs: bool = True,
        log_lines: int = 50,
        max_disruptions: int | None = 5,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._take_arguments(locals())
        self._validate_at_parse_time()


def render(op: _WorkloadOperator) -> dict[str, Any]:
    args = op._arguments(op.manifest)
    return op._render_object(args, op._placement(args, KEY, "ml", None))


def test_a_new_kind_needs_only_its_value_and_arguments() -> None:
    op = ToyOperator(task_id="toy", image="toy:1", colour="blue", checkpoint_uri="s3://b/ckpt")
    obj = render(op)
    assert (op.kind, op.api_version) == ("Toy", "example.org/v1")
    assert obj["metadata"]["name"].startswith("dag-toy-")
    assert obj["spec"]["env"] == {"COLOUR": "blue", "CHECKPOINT_URI": "s3://b/ckpt"}
    assert TOY.result(op._arguments(None), {"state": "succeeded"}) == {"state": "succeeded", "colour": "blue"}


def test_the_kinds_rules_and_the_shared_ones_run_at_parse_time() -> None:
    with pytest.raises(ValidationError) as bad_colour:
        ToyOperator(task_id="toy", image="toy:1", colour="green")
    assert bad_colour.value.field == "colour"
    with pytest.raises(ValidationError) as bad_gpus:
        ToyOperator(task_id="toy", image="toy:1", gpus=-1)
    assert bad_gpus.value.field == "gpus"
    with pytest.raises(ValidationError) as injected:
        ToyOperator(task_id="toy", image="toy:1", env={"COLOUR": "x"})
    assert injected.value.field == "env[COLOUR]"
    ToyOperator(task_id="toy", image="toy:1", colour="{{ params.colour }}")  # templated: checked in execute


@pytest.mark.parametrize("operator", [FineTuneJobOperator, PyTorchJobOperator, BatchInferenceJobOperator])
def test_the_public_operators_are_the_runner_and_a_kind_overriding_nothing(operator: type) -> None:
    assert operator.__mro__[1] is _WorkloadOperator
    public = {name for name in vars(operator) if not name.startswith("_")}
    assert public <= {"workload", "template_fields", "ui_color"}, public
    methods = {name for name, value in vars(operator).items() if inspect.isfunction(value)}
    assert methods == {"__init__"}, methods
