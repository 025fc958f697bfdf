"""Each public workload operator's signature (what an editor, ``help()`` and Airflow read) is exactly its
kind's declared arguments (``WorkloadKind.signature``, which the runner keeps and reads), and an argument a
kind refuses is not accepted: a TypeError naming it, when the DAG file is parsed."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_k8s_ml.operators import (
    BatchInferenceJobOperator,
    FineTuneJobOperator,
    PyTorchJobOperator,
    TFJobOperator,
    TrainJobOperator,
)
from airflow_k8s_ml.operators._args import POD_ARGUMENTS
from airflow_k8s_ml.operators._signature import PodArguments
from airflow_k8s_ml.operators._workload import _WorkloadOperator

WORKLOAD_OPERATORS = (
    FineTuneJobOperator,
    PyTorchJobOperator,
    TFJobOperator,
    TrainJobOperator,
    BatchInferenceJobOperator,
)
BATCH_URIS = {"model_uri": "s3://m/ckpt/", "input_uri": "s3://d/in/", "output_uri": "s3://d/out/"}
TRAINJOB_REFUSED = ("env_from", "scheduler_name", "ttl_seconds_after_finished", "gang_scheduler")
ids = pytest.mark.parametrize("operator", WORKLOAD_OPERATORS, ids=lambda op: op.__name__)


@ids
def test_the_signature_is_the_kinds_declaration(operator: type[_WorkloadOperator]) -> None:
    parameters = list(inspect.signature(operator).parameters.values())
    *listed, rest = parameters
    assert (rest.name, rest.kind) == ("kwargs", inspect.Parameter.VAR_KEYWORD)  # BaseOperator's arguments
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in listed)
    written = [(p.name, p.annotation, p.default) for p in listed]
    assert written == [(a.name, a.annotation, a.default) for a in operator.workload.signature]


@ids
def test_an_editor_sees_the_pod_the_deadlines_and_the_kinds_own_arguments(operator: type) -> None:
    shown = inspect.signature(operator).parameters
    for name in ("image", "command", "requests", "gpus", "deadline", "run_timeout", "namespace"):
        assert name in shown
    assert set(operator.workload.arguments._fields) <= set(shown)
    assert shown["deadline"].annotation == "timedelta | datetime | str | None"


def test_the_pod_group_is_the_pod_field_declarations_arguments() -> None:
    assert set(PodArguments._fields) == {*POD_ARGUMENTS, "pod_options"}


def test_only_the_trainjob_and_the_tfjob_refuse_shared_arguments() -> None:
    assert set(TFJobOperator.workload.refused) == {"gang_scheduler"}
    assert "gang_scheduler" not in inspect.signature(TFJobOperator).parameters
    assert set(TrainJobOperator.workload.refused) == set(TRAINJOB_REFUSED)
    assert not set(TRAINJOB_REFUSED) & set(inspect.signature(TrainJobOperator).parameters)
    for operator in (FineTuneJobOperator, PyTorchJobOperator, BatchInferenceJobOperator):
        assert not operator.workload.refused
        assert set(TRAINJOB_REFUSED) <= set(inspect.signature(operator).parameters)


@pytest.mark.parametrize(
    ("argument", "value", "hint"),
    [
        ("env_from", ["s3-credentials"], "secret_env"),
        ("scheduler_name", "volcano", "podGroupPolicy"),
        ("ttl_seconds_after_finished", 60, "on_finish"),
        ("gang_scheduler", "volcano", "podGroupPolicy"),
    ],
)
def test_a_refused_argument_fails_the_dag_file_with_a_typeerror_naming_it(
    argument: str, value: Any, hint: str
) -> None:
    with pytest.raises(TypeError) as info, DAG("refused", schedule=None):
        TrainJobOperator(task_id="train", image="trainer:1", **{argument: value})
    message = str(info.value)
    assert f"TrainJobOperator got an unexpected keyword argument {argument!r}" in message
    assert hint in message


def test_a_refused_argument_is_refused_by_partial_too() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'env_from'"), DAG("m", schedule=None):
        TrainJobOperator.partial(task_id="train", image="trainer:1", env_from=["s"])


def test_a_refused_argument_in_default_args_is_not_handed_to_the_kind() -> None:
    """default_args fill only the arguments a signature lists (Airflow's rule), so a DAG-wide ``env_from``
    reaches the Job but not the TrainJob."""
    with DAG("d", schedule=None, default_args={"env_from": ["s3-credentials"]}):
        job = FineTuneJobOperator(task_id="job", image="trainer:1")
        train = TrainJobOperator(task_id="train", image="trainer:1")
    assert job.env_from == ["s3-credentials"]
    assert not hasattr(train, "env_from")


def test_mapped_operators_take_the_listed_arguments() -> None:
    with DAG("mapped", schedule=None):
        mapped = FineTuneJobOperator.partial(task_id="ft", image="trainer:1", gpus=1).expand(
            args=[["--lr", "1e-4"], ["--lr", "3e-4"]]
        )
    assert mapped.partial_kwargs["gpus"] == 1
    with pytest.raises(TypeError, match="unexpected keyword argument 'gpu'"), DAG("typo", schedule=None):
        FineTuneJobOperator.partial(task_id="ft", image="trainer:1", gpu=1)


@ids
def test_the_templated_arguments_are_attributes(operator: type) -> None:
    extra = BATCH_URIS if operator is BatchInferenceJobOperator else {}
    op = operator(task_id="t", image="trainer:1", **extra)
    for field in operator.template_fields:
        assert hasattr(op, field), field
