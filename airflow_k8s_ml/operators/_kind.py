"""``WorkloadKind``: what differs between the workload operators, as one value handed to the runner.

Why a value and not hooks: the runner (:class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`)
validates, renders, submits or adopts, defers with the deadlines and finishes the same way for every kind.
What a kind adds is small and fixed - its ``apiVersion``/``kind``, the type of its own arguments, how to check
them without rendering (parse time), how to render its typed spec, the env it injects and what it adds to the
XCom - so it is a handful of functions in a named tuple, not ten overridable methods on a class hierarchy
whose ``__init__`` order decides what is already set (the former ``"output_uri" in vars(self)`` guard).

The status classifier and the replica names in logs are found by ``kind`` (``status.classify.CLASSIFIERS``,
``kube.resources.pod_label_key`` / ``replica_name``), so they need no entry here.

Import-light: imported on every DAG parse (slotted read-only classes and a
:class:`~airflow_k8s_ml.k8s.record.Record`, not dataclasses or NamedTuples; the spec modules load inside
``render`` only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from airflow_k8s_ml.k8s.record import Record

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


class _Frozen:
    """Slotted and read-only after ``__init__``: a frozen value without a dataclass's or a generic
    NamedTuple's class-creation cost (this module is imported on every DAG parse; a generic NamedTuple
    costs about 0.3 ms to define)."""

    __slots__: tuple[str, ...] = ()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class WorkloadArgs(_Frozen, Generic[A]):
    """The operator's arguments, read once after templating (or neutralised, at parse time).

    ``pod`` maps each pod argument the operator takes (the arguments of
    :data:`~airflow_k8s_ml.manifests.pod_fields.POD_FIELDS` plus ``pod_options``) to its value; ``own`` is
    the kind's own frozen value (its type is :attr:`WorkloadKind.arguments`).
    """

    __slots__ = (
        "active_deadline_seconds",
        "checkpoint_uri",
        "deadline",
        "labels",
        "manifest",
        "namespace",
        "own",
        "pod",
        "queue_name",
        "resume_from",
        "ttl_seconds_after_finished",
    )
    manifest: Any
    namespace: str | None
    resume_from: str | None
    checkpoint_uri: str | None
    deadline: Any
    queue_name: str | None
    labels: Mapping[str, str] | None
    active_deadline_seconds: int | None
    ttl_seconds_after_finished: int | None
    pod: Mapping[str, Any]
    own: A

    def __init__(
        self,
        *,
        manifest: Any,
        namespace: str | None,
        resume_from: str | None,
        checkpoint_uri: str | None,
        deadline: Any,
        queue_name: str | None,
        labels: Mapping[str, str] | None,
        active_deadline_seconds: int | None,
        ttl_seconds_after_finished: int | None,
        pod: Mapping[str, Any],
        own: A,
    ) -> None:
        self._set(
            manifest=manifest,
            namespace=namespace,
            resume_from=resume_from,
            checkpoint_uri=checkpoint_uri,
            deadline=deadline,
            queue_name=queue_name,
            labels=labels,
            active_deadline_seconds=active_deadline_seconds,
            ttl_seconds_after_finished=ttl_seconds_after_finished,
            pod=pod,
            own=own,
        )

    def with_manifest(self, manifest: Any) -> WorkloadArgs[A]:
        """The same arguments with another ``manifest`` (the prepared source of a raw manifest)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        return WorkloadArgs(**{**values, "manifest": manifest})


def no_env(args: WorkloadArgs[Any]) -> dict[str, str]:
    """A kind that injects nothing besides the checkpoint variables."""
    return {}


def no_check(args: WorkloadArgs[Any]) -> None:
    """A kind with no argument outside its typed spec."""


def same_result(args: WorkloadArgs[Any], result: dict[str, Any]) -> dict[str, Any]:
    """A kind whose XCom is the plain workload result."""
    return result


class WorkloadKind(_Frozen, Generic[A]):
    """One workload kind as the runner sees it.

    :param kind: / ``api_version``: what is created (and what a raw ``manifest=`` must be).
    :param arguments: the frozen type of the kind's own arguments; its field names are operator attributes.
    :param check_spec: the typed spec's rules over the arguments, without building it (no spec import: runs
        on every DAG parse; in ``execute`` the spec applies the same rules as it is built); ``injected_env``
        is what the pod will get from us. Not called for a raw ``manifest=``.
    :param render: the object to create for one attempt (imports the typed spec; ``execute`` only).
    :param check: rules for the kind's arguments that hold with a raw ``manifest=`` too (the batch URIs),
        at parse time (templated values are the placeholder) and in ``execute`` before any API call.
    :param env: variables the kind injects besides ``CHECKPOINT_URI``/``RESUME_FROM`` (refused in a user env).
    :param result: the XCom, from the workload's result (default: unchanged).
    """

    __slots__ = ("api_version", "arguments", "check", "check_spec", "env", "kind", "render", "result")
    kind: str
    api_version: str
    arguments: type[A]
    check_spec: Callable[[WorkloadArgs[A], Mapping[str, str]], None]
    render: Callable[[WorkloadArgs[A], Placement], dict[str, Any]]
    check: Callable[[WorkloadArgs[A]], None]
    env: Callable[[WorkloadArgs[A]], dict[str, str]]
    result: Callable[[WorkloadArgs[A], dict[str, Any]], dict[str, Any]]

    def __init__(
        self,
        *,
        kind: str,
        api_version: str,
        arguments: type[A],
        check_spec: Callable[[WorkloadArgs[A], Mapping[str, str]], None],
        render: Callable[[WorkloadArgs[A], Placement], dict[str, Any]],
        check: Callable[[WorkloadArgs[A]], None] = no_check,
        env: Callable[[WorkloadArgs[A]], dict[str, str]] = no_env,
        result: Callable[[WorkloadArgs[A], dict[str, Any]], dict[str, Any]] = same_result,
    ) -> None:
        self._set(
            kind=kind,
            api_version=api_version,
            arguments=arguments,
            check_spec=check_spec,
            render=render,
            check=check,
            env=env,
            result=result,
        )
