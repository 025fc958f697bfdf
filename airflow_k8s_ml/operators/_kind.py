"""``WorkloadKind``: what differs between the workload operators, as one value handed to the runner.

Why a value and not hooks: the runner (:class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`)
validates, renders, submits or adopts, defers with the deadlines and finishes the same way for every kind.
What a kind adds is small and fixed - its ``apiVersion``/``kind``, the type of its own arguments, how to check
them without rendering (parse time), how to render its typed spec, the env it injects and what it adds to the
XCom - so it is a handful of functions in one value, not ten overridable methods on a class hierarchy
whose ``__init__`` order decides what is already set (the former ``"output_uri" in vars(self)`` guard).

The status classifier and the replica names in logs are found by ``kind`` (``status.classify.CLASSIFIERS``,
``kube.resources.pod_label_key`` / ``replica_name``), so they need no entry here.

Import-light: imported on every DAG parse, so the values are :class:`~airflow_k8s_ml.k8s.record.Record`
subclasses, the value type of the pure layers (a dataclass or a generic NamedTuple generates code for every
class it defines, on every parse); the spec modules load inside ``render`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from airflow_k8s_ml.k8s.record import Record
from airflow_k8s_ml.operators._signature import (
    Argument,
    ObjectArguments,
    PodArguments,
    RunArguments,
    declared,
)

__all__ = ["Placement", "WorkloadArgs", "WorkloadKind"]

A = TypeVar("A")


class Placement(Record):
    """Where and as what one attempt is created: the parts of the object the operator owns."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    env: Mapping[str, str]
    resume_uri: str | None


class WorkloadArgs(Record, Generic[A]):
    """The operator's arguments, read once after templating (or neutralised, at parse time).

    ``pod`` maps each pod argument (:class:`~airflow_k8s_ml.operators._signature.PodArguments`) to its value;
    ``own`` is the kind's own value (its type is :attr:`WorkloadKind.arguments`). An argument the kind
    refuses (it is not in its signature) reads as None.
    """

    manifest: Any
    namespace: str | None
    resume_from: str | None
    checkpoint_uri: str | None
    deadline: Any
    queue_name: str | None
    labels: Mapping[str, str] | None
    active_deadline_seconds: int | None
    ttl_seconds_after_finished: int | None
    gang_scheduler: str | None
    pod: Mapping[str, Any]
    own: A


def no_env(args: WorkloadArgs[Any]) -> dict[str, str]:
    """A kind that injects nothing besides the checkpoint variables."""
    return {}


def no_check(args: WorkloadArgs[Any]) -> None:
    """A kind with no argument outside its typed spec."""


def same_result(args: WorkloadArgs[Any], result: dict[str, Any]) -> Any:
    """A kind whose XCom is the plain workload result."""
    return result


def nothing_to_collect(client: Any, record: Any) -> dict[str, Any]:
    """A kind whose succeeded workload leaves nothing to read besides its status."""
    return {}


class WorkloadKind(Record, Generic[A]):
    """One workload kind as the runner sees it.

    :param kind: / ``api_version``: what is created (and what a raw ``manifest=`` must be).
    :param arguments: the kind's own arguments, a Record whose body is their declaration (``name: type =
        default``, as the operator's signature writes them); its field names are operator attributes.
    :param check_spec: the typed spec's rules over the arguments, without building it (no spec import: runs
        on every DAG parse; in ``execute`` the spec applies the same rules as it is built); ``injected_env``
        is what the pod will get from us. Not called for a raw ``manifest=``.
    :param render: the object to create for one attempt (imports the typed spec; ``execute`` only).
    :param check: rules for the kind's arguments that hold with a raw ``manifest=`` too (the batch URIs),
        at parse time (templated values are the placeholder) and in ``execute`` before any API call.
    :param env: variables the kind injects besides ``CHECKPOINT_URI``/``RESUME_FROM`` (refused in a user env).
    :param result: the XCom, from the workload's result (default: unchanged).
    :param collect: what else a succeeded workload left to read, as result entries, read with the cluster
        client before ``on_finish`` may delete it (``(client, record) -> dict``; the task decorators read
        the function's return value from the pods' termination messages). Kept with the result in
        ``task_state_store``, so a retry after success returns it without the pods.
    :param refused: shared arguments the kind cannot use -> why, and what to use instead. They are not in
        its signature, and passing one is a TypeError saying so.
    """

    kind: str
    api_version: str
    arguments: type[A]
    check_spec: Callable[[WorkloadArgs[A], Mapping[str, str]], None]
    render: Callable[[WorkloadArgs[A], Placement], dict[str, Any]]
    check: Callable[[WorkloadArgs[A]], None] = no_check
    env: Callable[[WorkloadArgs[A]], dict[str, str]] = no_env
    result: Callable[[WorkloadArgs[A], dict[str, Any]], Any] = same_result
    collect: Callable[[Any, Any], dict[str, Any]] = nothing_to_collect
    refused: Mapping[str, str] = MappingProxyType({})

    @cached_property
    def signature(self) -> tuple[Argument, ...]:
        """Every argument the kind's operator takes besides BaseOperator's, in the order its ``__init__``
        lists them: the kind's own, the pod's, the object's, the runner's, less the refused ones. The runner
        keeps and reads the operator's arguments by it."""
        groups = (self.arguments, PodArguments, ObjectArguments, RunArguments)
        return declared(*groups, refused=self.refused)  # type: ignore[arg-type]

    @cached_property
    def names(self) -> frozenset[str]:
        """The names of :attr:`signature`."""
        return frozenset(argument.name for argument in self.signature)
