"""Each public workload operator's signature (what an editor, ``help()`` and Airflow read) is exactly its
kind's declared arguments (``WorkloadKind.signature``, which the runner keeps and reads), and an argument a
kind refuses is not accepted: a TypeError naming it, when the DAG file is parsed."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators import (
    BatchInferenceCronJobOperator,
    BatchInferenceJobOperator,
    FineTuneJobOperator,
    InferenceDeploymentOperator,
    PyTorchJobOperator,
    TFJobOperator,
    TrainJobOperator,
)
from airflow_k8s_ml.operators._args import POD_ARGUMENTS
from airflow_k8s_ml.operators._runner import _Runner
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


def test_only_the_trainjob_and_the_tfjob_refuse_shared_arguments_and_single_pod_jobs_take_no_budget() -> None:
    assert set(TFJobOperator.workload.refused) == {"gang_scheduler"}
    assert "gang_scheduler" not in inspect.signature(TFJobOperator).parameters
    assert set(TrainJobOperator.workload.refused) == set(TRAINJOB_REFUSED)
    assert not set(TRAINJOB_REFUSED) & set(inspect.signature(TrainJobOperator).parameters)
    assert not PyTorchJobOperator.workload.refused
    for operator in (FineTuneJobOperator, PyTorchJobOperator, BatchInferenceJobOperator):
        assert set(TRAINJOB_REFUSED) <= set(inspect.signature(operator).parameters)
    for operator in (FineTuneJobOperator, BatchInferenceJobOperator):
        assert set(operator.workload.refused) == {"disruption_budget"}
        assert "disruption_budget" not in inspect.signature(operator).parameters
    with pytest.raises(TypeError, match=r"disruption_budget.*evicted and replaced"):
        FineTuneJobOperator(task_id="t", image="python:3.11", disruption_budget=True)


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


# -- the serving operators: explicit signatures, the runner's budgets, the runner itself ---------------------

SERVING = {
    InferenceDeploymentOperator: {"name": "digits", "model_uri": "s3://m/ckpt/", "image": "py:3"},
    BatchInferenceCronJobOperator: {"name": "scores", "schedule": "0 3 * * *", **BATCH_URIS, "image": "py:3"},
}
serving_ids = pytest.mark.parametrize("operator", list(SERVING), ids=lambda op: op.__name__)
RUNNER_METHODS = (
    "_run_key", "_client", "_stored", "_remember", "_decide", "_adopt", "_wait",
    "_deferral_timeout", "resume_execution", "on_kill",
)  # fmt: skip


@serving_ids
def test_a_serving_signature_lists_its_arguments_keyword_only_and_typed(operator: type) -> None:
    *listed, rest = inspect.signature(operator).parameters.values()
    assert (rest.name, rest.kind) == ("kwargs", inspect.Parameter.VAR_KEYWORD)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in listed)
    assert all(p.annotation is not inspect.Parameter.empty for p in listed)


def test_the_cronjobs_budgets_are_the_runners_typed_and_templated() -> None:
    shown = inspect.signature(BatchInferenceCronJobOperator).parameters
    runner = {a.name: a for a in FineTuneJobOperator.workload.signature}
    for name in ("admission_timeout", "startup_timeout", "run_timeout", "deadline"):
        assert (shown[name].annotation, shown[name].default) == (runner[name].annotation, None), name
        assert name in BatchInferenceCronJobOperator.template_fields
    assert "rollout_timeout" in InferenceDeploymentOperator.template_fields


@pytest.mark.parametrize("operator", [*WORKLOAD_OPERATORS, *SERVING], ids=lambda op: op.__name__)
def test_every_operator_runs_on_the_one_runner(operator: type) -> None:
    """What every operator does around its objects (run key, client, submit-or-adopt, the wait, the
    deferral timeout, on_kill) is the runner's: no operator writes its own."""
    assert issubclass(operator, _Runner)
    for method in RUNNER_METHODS:
        assert getattr(operator, method) is getattr(_Runner, method), f"{operator.__name__}.{method}"


@pytest.mark.parametrize(
    ("argument", "value"),
    [("deadline", "soon"), ("run_timeout", -1), ("admission_timeout", "0"), ("startup_timeout", [1])],
)
def test_the_cronjobs_budgets_are_parsed_by_deadlines_naming_the_argument(argument: str, value: Any) -> None:
    with pytest.raises(ValidationError) as info:
        BatchInferenceCronJobOperator(
            task_id="b", **SERVING[BatchInferenceCronJobOperator], **{argument: value}
        )
    assert info.value.field == argument


def test_budgets_may_be_templated_and_the_deadline_absolute() -> None:
    templated = BatchInferenceCronJobOperator(
        task_id="b",
        **SERVING[BatchInferenceCronJobOperator],
        deadline="{{ params.until }}",
        run_timeout="{{ x }}",
    )
    templated.deadline, templated.run_timeout = "2024-05-01T06:00:00+00:00", "600"  # as rendered
    settings = templated._wait_settings()
    assert settings.deadlines.deadline == datetime(2024, 5, 1, 6, tzinfo=UTC)
    assert settings.deadlines.run_timeout == timedelta(minutes=10)
    deploy = InferenceDeploymentOperator(
        task_id="d", **SERVING[InferenceDeploymentOperator], rollout_timeout="{{ params.budget }}"
    )
    deploy.rollout_timeout = "90"  # as rendered
    assert deploy._rollout_settings().deadlines.deadline == timedelta(seconds=90)
    with pytest.raises(ValidationError) as info:
        InferenceDeploymentOperator(
            task_id="e", **SERVING[InferenceDeploymentOperator], rollout_timeout="soon"
        )
    assert info.value.field == "rollout_timeout"
