"""The workload operators' arguments, declared once: what each public operator's signature lists.

Why a declaration besides the signatures: an editor, ``help()`` and Airflow (``default_args``,
``partial``/``expand``) read an operator's ``__init__``, so each public operator writes its arguments out,
keyword-only, typed, with their defaults. What a kind takes is declared here, once, by groups: the
runner's (:class:`RunArguments`), the pod's (:class:`PodArguments`), the created object's
(:class:`ObjectArguments`) and the kind's own Record (:attr:`WorkloadKind.arguments
<airflow_k8s_ml.operators._kind.WorkloadKind>`), less what the kind refuses. The runner keeps and reads an
operator's arguments by this declaration (:meth:`WorkloadKind.signature
<airflow_k8s_ml.operators._kind.WorkloadKind.signature>`), and ``tests/unit/test_operator_signatures.py``
checks that each public signature is exactly its kind's: names, annotations (as written) and defaults.

Each group is a :class:`~airflow_k8s_ml.k8s.record.Record` whose body reads as the signature does (``name:
type = default``); it is never instantiated. Pure and import-light: imported on every DAG parse.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.k8s.record import Record

if TYPE_CHECKING:  # the annotations below are text (postponed evaluation); these are for type checkers
    from datetime import datetime, timedelta

__all__ = ["REQUIRED", "Argument", "ObjectArguments", "PodArguments", "RunArguments", "declared"]

#: The default of an argument that has none (what ``inspect.Parameter.default`` says then).
REQUIRED: Any = inspect.Parameter.empty


class Argument(Record):
    """One keyword-only argument as a signature shows it: its annotation as written, its default."""

    name: str
    annotation: str
    default: Any = REQUIRED


class RunArguments(Record):
    """What the runner takes for every kind: the raw manifest, where, with which connections, resume, the
    Airflow-side deadlines and disruption limit, the finish and how to wait."""

    manifest: Mapping[str, Any] | str | None = None
    namespace: str | None = None
    kubernetes_conn_id: str = "kubernetes_default"
    resume_from: str | None = None
    checkpoint_uri: str | None = None
    aws_conn_id: str | None = "aws_default"
    admission_timeout: timedelta | float | str | None = None
    startup_timeout: timedelta | float | str | None = None
    run_timeout: timedelta | float | str | None = None
    deadline: timedelta | datetime | str | None = None
    on_finish: str = "keep"
    deferrable: bool = True
    poll_interval: float = 30.0
    stream_logs: bool = True
    log_lines: int = 50
    max_disruptions: int | None = 5


class PodArguments(Record):
    """The pod: one argument per field of :data:`~airflow_k8s_ml.manifests.pod_fields.POD_FIELDS` that has
    one (``operators._args.POD_ARGUMENTS``), plus ``pod_options`` for the others. None: the field's
    default."""

    image: str | None = None
    command: Sequence[str] | None = None
    args: Sequence[str] | None = None
    env: Mapping[str, str | int | float] | None = None
    secret_env: Mapping[str, str] | None = None
    env_from: Sequence[str] | None = None
    requests: Mapping[str, str | int | float] | None = None
    limits: Mapping[str, str | int | float] | None = None
    gpus: int | None = None
    gpu_resource: str | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] | None = None
    image_pull_secrets: Sequence[str] | None = None
    volumes: Sequence[Mapping[str, Any]] | None = None
    shm_size: str | None = None
    service_account: str | None = None
    scheduler_name: str | None = None
    pod_security_context: Mapping[str, Any] | None = None
    container_security_context: Mapping[str, Any] | None = None
    pod_options: Mapping[str, Any] | None = None


class ObjectArguments(Record):
    """The created object's own fields every kind shares (Kueue queue, labels, Kubernetes-side limits), the
    gang scheduler its pods are placed by, and the PodDisruptionBudget created with a distributed run."""

    queue_name: str | None = None
    labels: Mapping[str, str] | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    gang_scheduler: str | None = None
    disruption_budget: bool = False


def declared(*groups: type[Record], refused: Collection[str] = ()) -> tuple[Argument, ...]:
    """The arguments of ``groups``, in order, less the ``refused`` ones."""
    arguments = []
    for group in groups:
        annotations = inspect.get_annotations(group)
        arguments += [
            Argument(name, str(annotations[name]), group._defaults.get(name, REQUIRED))
            for name in group._fields
            if name not in refused
        ]
    return tuple(arguments)
