"""A workload kind is a value handed to the one runner: a new operator sets ``workload`` and its own
arguments and overrides nothing (what ``docs/contributing.md`` "Adding a workload kind" promises)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.operators import BatchInferenceJobOperator, FineTuneJobOperator, PyTorchJobOperator
from airflow_k8s_ml.operators._kind import Placement, WorkloadArgs, WorkloadKind
from airflow_k8s_ml.operators._workload import _WorkloadOperator
from airflow_k8s_ml.operators.training import check_pod

KEY = RunKey("dag", "toy", "manual__1")


class ToyArguments(NamedTuple):
    colour: str


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
    """A thin operator: the kind value, its own argument, nothing overridden."""

    workload = TOY
    template_fields = (*_WorkloadOperator.template_fields, "colour")

    def __init__(self, *, colour: str = "red", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.colour = colour
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
