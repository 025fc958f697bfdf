"""The one pod field declaration (``manifests/pod_fields.py``) against everything that lists pod fields:
the typed PodTemplate, the parse-time rules, each operator's signature and each operator's docstring."""

from __future__ import annotations

import inspect
import re
from dataclasses import MISSING, fields

import pytest

from airflow_k8s_ml.manifests.pod import PodTemplate
from airflow_k8s_ml.manifests.pod_fields import POD_FIELDS, operator_arguments
from airflow_k8s_ml.manifests.pod_rules import POD_DEFAULTS
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
from airflow_k8s_ml.operators._serving import POD_ARGUMENTS as SERVING_POD_ARGUMENTS

WORKLOAD_OPERATORS = (
    FineTuneJobOperator,
    PyTorchJobOperator,
    TFJobOperator,
    TrainJobOperator,
    BatchInferenceJobOperator,
)
SERVING_OPERATORS = (InferenceDeploymentOperator, BatchInferenceCronJobOperator)
#: Every name a pod field goes by: its PodTemplate name and its operator argument. ``labels`` and
#: ``annotations`` are left out: as operator arguments they name the workload's metadata, not the pod's.
POD_NAMES = ({f.name for f in POD_FIELDS} | {f.argument for f in POD_FIELDS if f.argument}) - {
    "labels",
    "annotations",
}
#: Former names still accepted with a deprecation warning (``renamed_argument``).
DEPRECATED = {"env_from_secrets"}


def parameters(cls: type) -> set[str]:
    """The keyword arguments an operator accepts: its own ``__init__`` and those of its bases of ours."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("airflow_k8s_ml.") and "__init__" in vars(klass):
            names |= set(inspect.signature(klass.__init__).parameters) - {"self", "kwargs"}
    return names


def documented(cls: type) -> set[str]:
    """The names a docstring documents: ````name```` anywhere, and ``:param a, b, c:`` groups."""
    doc = inspect.getdoc(cls) or ""
    names = set(re.findall(r"``(\w+)``", doc))
    for group in re.findall(r":param ([\w, ]+):", doc):
        names |= {name.strip() for name in group.split(",")}
    return names


def test_the_typed_pod_template_has_exactly_the_declared_fields_in_order() -> None:
    declared = [(f.name, f.default) for f in POD_FIELDS]
    typed = [
        (
            f.name,
            None
            if f.default is MISSING and f.default_factory is MISSING
            else f.default
            if f.default is not MISSING
            else f.default_factory(),
        )  # type: ignore[misc]
        for f in fields(PodTemplate)
    ]
    assert typed == declared


def test_the_rules_and_the_argument_maps_are_derived_from_the_declaration() -> None:
    assert dict(POD_DEFAULTS) == {f.name: f.default for f in POD_FIELDS if f.name != "image"}
    assert dict(POD_ARGUMENTS) == {f.argument: f.name for f in POD_FIELDS if f.argument}
    assert dict(SERVING_POD_ARGUMENTS) == {f.argument: f.name for f in POD_FIELDS if f.serving}
    assert set(SERVING_POD_ARGUMENTS) <= set(POD_ARGUMENTS) == set(operator_arguments())


@pytest.mark.parametrize(
    ("operator", "arguments"),
    [(op, POD_ARGUMENTS) for op in WORKLOAD_OPERATORS]
    + [(op, SERVING_POD_ARGUMENTS) for op in SERVING_OPERATORS],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_each_operator_takes_and_documents_exactly_its_pod_arguments(operator: type, arguments: dict) -> None:
    taken = parameters(operator)
    refused = set(operator.workload.refused) if operator in WORKLOAD_OPERATORS else set()  # TrainJob's
    expected = {*arguments, "pod_options"} - refused
    assert expected <= taken, f"missing pod arguments: {sorted(expected - taken)}"
    undeclared = (taken & POD_NAMES) - expected - DEPRECATED
    assert not undeclared, f"pod arguments not in the declaration for this operator: {sorted(undeclared)}"
    undocumented = sorted(expected - documented(operator))
    assert not undocumented, f"{operator.__name__}'s docstring does not document {undocumented}"
