"""``_WorkloadOperator``: the one runner - validate, render, submit-or-adopt, defer, finish - for every kind.

Why one runner and a kind value, not a hierarchy of hooks: the fine-tune Job, the PyTorchJob and the batch
inference Job differ only in a few facts (see :class:`~airflow_k8s_ml.operators._kind.WorkloadKind`).
Everything around them - parse-time validation of static arguments, templated ones checked before any API
call, deterministic names and run labels, the submit-or-adopt decision (``task_state_store`` first, labels
as the fallback and the guard), resume resolution on every launch, the deferral with phased deadlines, and
the finish (XCom, diagnostics into the task log, cleanup policy, a precise failure message) - lives here
once. A public operator is this class plus a ``workload`` value and its signature; it overrides nothing.
The arguments are read once into a frozen :class:`~airflow_k8s_ml.operators._kind.WorkloadArgs`.

Import-light on purpose: this module is imported when a DAG file is parsed, so the Kubernetes client, the
trigger, the status classifiers and the checkpoint store are imported inside the methods that need them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.formats import validate_namespace
from airflow_k8s_ml.manifests.gang import check_gang_scheduler, with_gang_scheduler
from airflow_k8s_ml.manifests.pod_rules import check_injected_env
from airflow_k8s_ml.manifests.validation import check_non_empty_str
from airflow_k8s_ml.operators._args import (
    CHECKPOINT_URI_ENV,
    PLACEHOLDER,
    RESUME_FROM_ENV,
    RESUME_PLACEHOLDER,
    RESUMED_FROM_ANNOTATION,
    check_on_finish,
    is_templated,
    neutralize,
    substitute_resume,
)
from airflow_k8s_ml.operators._kind import Placement, WorkloadArgs, WorkloadKind
from airflow_k8s_ml.operators._runner import _Runner, record_of
from airflow_k8s_ml.operators._signature import PodArguments
from airflow_k8s_ml.operators.links import ClusterDashboardLink

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.manifests.naming import RunKey
    from airflow_k8s_ml.operators._adopt import Launch, ReturnResult
    from airflow_k8s_ml.operators.record import WorkloadRecord
    from airflow_k8s_ml.triggers.events import WorkloadEvent

__all__ = ["Placement", "_WorkloadOperator", "parse_time_key"]

#: The variables the runner sets when the attempt has them (a checkpoint base; a checkpoint to resume from,
#: which a retry resolves even when the first attempt had none), and where their value comes from. A user
#: ``env``/``secret_env`` may not set them, whether or not this attempt injects them (docs/operators.md).
RESERVED_ENV = {
    CHECKPOINT_URI_ENV: "from checkpoint_uri",
    RESUME_FROM_ENV: "from resume_from, resolved at every launch",
}

#: A string ``manifest=`` ending so is a file to read (else it is YAML text).
YAML_SUFFIXES = (".yaml", ".yml")


def parse_time_key() -> RunKey:
    """The RunKey standing in for the run at DAG parse time, when there is none yet.

    (Imported on use: :mod:`~airflow_k8s_ml.manifests.naming` defines a dataclass, which costs code
    generation on every DAG parse, and most parse-time checks need no run identity.)
    """
    from airflow_k8s_ml.manifests.naming import RunKey

    return RunKey(dag_id="dag", task_id="task", run_id="manual__parse")


class _WorkloadOperator(_Runner):
    """The one runner of the workload operators; see the module docstring for what it owns.

    A thin operator sets :attr:`workload` (its :class:`~airflow_k8s_ml.operators._kind.WorkloadKind`) and
    writes an ``__init__`` whose keyword-only parameters are exactly ``workload.signature`` (the editor's and
    ``help()``'s view; ``tests/unit/test_operator_signatures.py`` compares them) plus ``**kwargs`` for
    BaseOperator's, and whose body is ``super().__init__(**kwargs)``, ``self._take_arguments(locals())`` and
    ``self._validate_at_parse_time()``. Nothing else is overridden.

    :param manifest: raw escape hatch of the operator's kind: a dict (templated), YAML text, or a ``.yaml`` /
        ``.yml`` file (absolute or relative to the DAG folder; Jinja in it is rendered in ``execute``).
        Validated, named and labelled like a rendered spec. Excludes the pod arguments.
    :param namespace: where to create the workload (templated); None: the connection's namespace.
    :param kubernetes_conn_id: the cncf ``kubernetes`` connection (kubeconfig path, in-cluster, ...).
    :param resume_from: ``"latest"`` (newest complete checkpoint under ``checkpoint_uri``), a checkpoint URI,
        or None (templated). Resolved at every launch, including retries; given to the pod as env
        ``RESUME_FROM`` and wherever an argument contains ``{{ resume_from }}``.
    :param checkpoint_uri: base URI of the checkpoints (templated); injected as env ``CHECKPOINT_URI``.
    :param aws_conn_id: connection for ``s3://`` checkpoint lookups.
    :param admission_timeout: Airflow-side budget while queued or unschedulable (timedelta or seconds).
    :param startup_timeout: budget while pods are placed but not running (image pulls, init containers).
    :param run_timeout: budget while running.
    :param deadline: overall budget from the attempt's submission (timedelta), or an absolute time
        (datetime or ISO 8601 string, templated, e.g.
        ``{{ (logical_date + macros.timedelta(hours=6)).isoformat() }}``).
    :param on_finish: ``keep`` (default), ``delete_on_success`` or ``delete`` (after success and failure; the
        diagnostics are logged first). An expired deadline always deletes the workload.
    :param deferrable: wait in the triggerer (default) instead of polling in the worker slot.
    :param poll_interval: seconds between status reads when polling (sync mode, trigger fallback).
    :param stream_logs: relay pod logs into the task log while waiting.
    :param log_lines: how many last log lines per pod go into the task log on failure.
    :param disruption_budget: PyTorchJob, TFJob, TrainJob: create a policy/v1 PodDisruptionBudget with the
        workload that keeps every replica (``minAvailable`` = all of them), owned by the workload (removed
        with it), so a drain's evictions wait (429) until the run ends (:mod:`.manifests.disruption_budget`;
        a TrainJob needs ``num_nodes``). Default False.
    :param max_disruptions: how many of the workload's pods the cluster may take away (evictions, drains,
        preemptions: condition ``DisruptionTarget``) in one attempt before the task fails with
        ``evicted N times`` and the workload is deleted (default 5; None: no limit; 0: the first one
        fails). Each disruption below it is replaced at once and resumes from the newest checkpoint, and
        is not a failure (docs/checkpoints.md). The count and the time lost are in the XCom's
        ``disruptions``.

    :param gang_scheduler: ``"volcano"``: the pods are scheduled by Volcano as one gang (``schedulerName``,
        and for a PyTorchJob the PodGroup annotation and ``minAvailable``: :mod:`.manifests.gang`).
        Rendering only: the cluster must run Volcano (and, for a PyTorchJob, a training operator with
        gang scheduling on). A TrainJob has no such argument (its pods come from the runtime).

    The pod arguments (``image`` ... ``pod_options``) and the workload's ``queue_name``, ``labels``,
    ``active_deadline_seconds`` and ``ttl_seconds_after_finished`` are documented on each public operator.
    """

    workload: ClassVar[WorkloadKind[Any]]
    #: Pod arguments that ``manifest=`` replaces (set either, not both).
    pod_fields: ClassVar[tuple[str, ...]] = PodArguments._fields
    # ``aws_conn_id`` is templated so its value lands in the rendered fields, where the UI's Training tab
    # finds the connection to read this task's checkpoints with.
    template_fields: Sequence[str] = (
        "namespace",
        "resume_from",
        "checkpoint_uri",
        "deadline",
        "manifest",
        "admission_timeout",
        "startup_timeout",
        "run_timeout",
        "aws_conn_id",
        "image",
        "command",
        "args",
        "env",
        "queue_name",
    )
    ui_color = "#dbe9f6"
    operator_extra_links = (ClusterDashboardLink(),)

    # The arguments the runner reads itself, for type checkers: kept by :meth:`_take_arguments`, declared
    # (with their defaults) in :class:`~airflow_k8s_ml.operators._signature.RunArguments`.
    manifest: Mapping[str, Any] | str | None
    kubernetes_conn_id: str
    aws_conn_id: str | None
    admission_timeout: Any
    startup_timeout: Any
    run_timeout: Any
    deadline: Any
    on_finish: str
    deferrable: bool
    poll_interval: float
    stream_logs: bool
    log_lines: int
    max_disruptions: int | None
    disruption_budget: bool

    def __init__(self, **kwargs: Any) -> None:
        """BaseOperator's arguments (``task_id``, ``retries``, ...). The kind's arguments are listed by the
        public operator's ``__init__``, which hands them to :meth:`_take_arguments`.

        An argument the kind refuses is a TypeError that says why (rather than BaseOperator's bare "Invalid
        arguments were passed"), raised while the DAG file is parsed."""
        for name in kwargs:
            if name in self.workload.refused:
                raise TypeError(
                    f"{type(self).__name__} got an unexpected keyword argument {name!r}: "
                    f"{self.workload.refused[name]}"
                )
        super().__init__(**kwargs)

    def _take_arguments(self, given: Mapping[str, Any]) -> None:
        """Keep the kind's arguments (:attr:`WorkloadKind.signature`) as attributes, taken from ``given``,
        the public operator's ``locals()`` in its ``__init__``, and check those the runner owns."""
        for argument in self.workload.signature:
            setattr(self, argument.name, given[argument.name])
        self.kubernetes_conn_id = check_non_empty_str(self.kubernetes_conn_id, "kubernetes_conn_id")
        self.on_finish = check_on_finish(self.on_finish)
        check_gang_scheduler(self._declared("gang_scheduler"), self._declared("scheduler_name"), self.kind)

    def _declared(self, name: str) -> Any:
        """An argument's value; None for one the kind refuses (it is not in its signature)."""
        return getattr(self, name) if name in self.workload.names else None

    @property
    def kind(self) -> str:
        """The Kubernetes kind this operator creates (its :attr:`workload`'s)."""
        return self.workload.kind

    @property
    def api_version(self) -> str:
        return self.workload.api_version

    # -- the arguments, read once ------------------------------------------------------------------------
    def _arguments(self, manifest: Any, *, neutral: bool = False) -> WorkloadArgs[Any]:
        """The arguments as one frozen value (``neutral``: templated strings swapped for the placeholder,
        the parse-time check). ``manifest`` is the prepared source (:meth:`_manifest_source`)."""

        def read(name: str) -> Any:
            value = self._declared(name)
            return neutralize(value) if neutral else value

        own_type: Any = self.workload.arguments
        return WorkloadArgs(
            manifest=neutralize(manifest) if neutral else manifest,
            namespace=read("namespace"),
            resume_from=read("resume_from"),
            checkpoint_uri=read("checkpoint_uri"),
            deadline=read("deadline"),
            queue_name=read("queue_name") or None,  # "" (e.g. an empty ``queue`` Param): not queued
            labels=read("labels"),
            active_deadline_seconds=read("active_deadline_seconds"),
            ttl_seconds_after_finished=read("ttl_seconds_after_finished"),
            gang_scheduler=read("gang_scheduler"),
            pod={name: read(name) for name in self.pod_fields},
            own=own_type(**{name: read(name) for name in own_type._fields}),
        )

    # -- validation -------------------------------------------------------------------------------------
    def _validate_at_parse_time(self) -> None:
        """Called by each operator at the end of ``__init__``: everything static is checked now (DAG import
        fails with the field's name); templated values stand in as placeholders until ``execute``.

        Checked with the kind's rules functions (``workload.check``), not by rendering: rendering needs the
        typed specs, whose modules cost milliseconds to import in every dag-processor fork
        (``bench/parse_cost.py``). A raw ``manifest=`` is the exception: it is prepared as in ``execute``.
        """
        args = self._arguments(self.manifest, neutral=True)
        self._check(args)
        self._wait_settings(args, templated_ok=True)
        if self.manifest is not None:
            source = self._manifest_source(self.manifest, context=None)
            if is_templated(source):
                return  # a Jinja template (file or dict): rendered and validated in execute
            args = args._replace(manifest=neutralize(source))
            namespace = args.namespace or "default"
            self._render_raw(args, self._placement(args, parse_time_key(), namespace, resume_uri=None))
            return
        self._check_spec(args)

    def _check_spec(self, args: WorkloadArgs[Any]) -> None:
        """The typed arguments checked as the render would check them, without building anything."""
        self.workload.check_spec(args, self._injected_env(args, resume_uri=None))

    def _manifest_source(self, manifest: Any, context: Context | None) -> Any:
        """A dict or YAML text as given; a ``.yaml``/``.yml`` path (absolute, or relative to the DAG folder)
        is read, and rendered with Jinja when a ``context`` is given (execute time).

        Why not Airflow's ``template_ext``: it builds a Jinja environment per operator while the DAG file is
        parsed, which is most of an operator's parse cost; a file read costs microseconds.
        """
        if not (isinstance(manifest, str) and manifest.strip().endswith(YAML_SUFFIXES)):
            return manifest
        path = Path(manifest.strip())
        if not path.is_absolute() and self.has_dag() and self.dag.folder:
            path = Path(self.dag.folder) / path
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValidationError("manifest", f"cannot read {path}: {exc.strerror or exc}") from None
        if context is not None and is_templated(text):
            with_placeholder: Any = {**context, "resume_from": RESUME_PLACEHOLDER}
            text = self.render_template(text, with_placeholder)
        return text

    def _check(self, args: WorkloadArgs[Any]) -> None:
        """The checks every kind shares: namespace, the checkpoint URIs, manifest versus pod arguments."""
        if args.namespace is not None:
            validate_namespace(args.namespace)
        resume_from, checkpoint_uri = args.resume_from, args.checkpoint_uri
        if checkpoint_uri not in (None, PLACEHOLDER):
            from airflow_k8s_ml.checkpoints.uri import parse_uri

            parse_uri(checkpoint_uri, "checkpoint_uri")
        if resume_from not in (None, "", PLACEHOLDER):
            if str(resume_from).strip().lower() == "latest":
                if checkpoint_uri is None:
                    raise ValidationError("resume_from", "'latest' needs checkpoint_uri (the base to search)")
            else:
                from airflow_k8s_ml.checkpoints.uri import parse_uri

                parse_uri(resume_from, "resume_from")
        for name in ("env", "secret_env"):  # ours on every attempt that has them, so never the user's
            for var in RESERVED_ENV:
                if isinstance(args.pod.get(name), Mapping) and var in args.pod[name]:
                    raise ValidationError(
                        f"{name}[{var}]",
                        f"{var} is set by the operator ({RESERVED_ENV[var]}); remove it, pass that argument",
                    )
        if args.manifest is not None:
            given = [name for name in self.pod_fields if args.pod.get(name) not in (None, {}, [], ())]
            if given:
                raise ValidationError("manifest", f"conflicts with {', '.join(given)}: pass one or the other")
        self.workload.check(args)

    # -- rendering --------------------------------------------------------------------------------------
    def _injected_env(self, args: WorkloadArgs[Any], resume_uri: str | None) -> dict[str, str]:
        """The variables the operator sets in the pod (a user ``env`` setting one of them is an error)."""
        env = dict(self.workload.env(args))
        if args.checkpoint_uri:
            env[CHECKPOINT_URI_ENV] = str(args.checkpoint_uri)
        if resume_uri:
            env[RESUME_FROM_ENV] = resume_uri
        return env

    def _placement(
        self, args: WorkloadArgs[Any], key: RunKey, namespace: str, resume_uri: str | None
    ) -> Placement:
        annotations = key.annotations()
        if resume_uri:
            annotations[RESUMED_FROM_ANNOTATION] = resume_uri
        return Placement(
            name=key.workload_name(self.workload.kind),
            namespace=namespace,
            labels=key.labels(),
            annotations=annotations,
            env=self._injected_env(args, resume_uri),
            resume_uri=resume_uri,
        )

    def _render_object(self, args: WorkloadArgs[Any], placement: Placement) -> dict[str, Any]:
        """The object to create: the raw manifest (prepared) or the kind's typed spec, rendered."""
        if args.manifest is not None:
            obj = self._render_raw(args, placement)
        else:
            obj = self.workload.render(args, placement)
        if args.gang_scheduler is not None:
            obj = with_gang_scheduler(obj, args.gang_scheduler)
        return obj

    def _render_raw(self, args: WorkloadArgs[Any], placement: Placement) -> dict[str, Any]:
        from airflow_k8s_ml.manifests.raw import env_containers, prepare_manifest

        obj = prepare_manifest(
            args.manifest,
            namespace=placement.namespace,
            name=placement.name,
            labels=placement.labels,
            annotations=placement.annotations,
            kinds=frozenset({(self.workload.api_version, self.workload.kind)}),
        )
        for path, container in env_containers(obj):
            if placement.env:
                container["env"] = _with_env(container, placement.env, path)
            if container.get("args"):
                container["args"] = substitute_resume(container["args"], placement.resume_uri)
        return obj

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        """Let ``{{ resume_from }}`` survive Jinja: it renders to itself and is replaced at launch, when the
        checkpoint is known (rendering happens before ``execute``, too early to resolve it)."""
        with_placeholder: Any = {**context, "resume_from": RESUME_PLACEHOLDER}
        super().render_template_fields(with_placeholder, jinja_env)

    def execute(self, context: Context) -> Any:
        from airflow_k8s_ml.operators._adopt import Adopt, ReturnResult

        self._execute_started = time.time()
        args = self._arguments(self._manifest_source(self.manifest, context))
        self._check(args)
        settings = self._wait_settings(args)
        key = self._run_key(context)
        client = self._client(args.namespace)
        namespace = args.namespace or client.namespace
        # Everything validated before the first API call: a bad rendered value creates nothing.
        rendered = self._render_object(args, self._placement(args, key, namespace, resume_uri=None))
        if self._declared("disruption_budget"):
            from airflow_k8s_ml.manifests.disruption_budget import disruption_budget

            disruption_budget(rendered)

        decision = self._decide(context, client, key, namespace, self.api_version, self.kind)
        if isinstance(decision, ReturnResult):
            self._backfill_logs(client, decision, namespace)
            return self.workload.result(args, self._return_existing(decision, namespace))
        if isinstance(decision, Adopt):
            for other in decision.others:  # never created by us on purpose; say so rather than hide it
                self.log.warning("another active %s of this task instance: %s", self.kind, other.name)
            record = self._adopt(context, decision.workload, namespace, self.api_version, self.kind)
        else:
            record = self._launch(client, args, key, namespace, decision)
        self._remember(context, record)
        event = self._wait(context, client, record, settings, delete_on_kill=True)
        return self.workload.result(args, self._finish(context, record, event))

    def _backfill_logs(self, client: KubeClient, decision: ReturnResult, namespace: str) -> None:
        """A workload that finished while no trigger relayed it (the worker died between creating it and
        deferring): its lines have reached no try's log, so this try logs them, from the pod logs.

        The log cursor annotation is the evidence: a trigger that relayed any line of it wrote one, and
        then those lines are in that try's log already. Best effort: pods may be gone (TTL, eviction)."""
        from airflow_k8s_ml.triggers.log_cursor import CURSOR_ANNOTATION

        workload = decision.workload
        if decision.cached is not None or workload is None or not self.stream_logs:
            return
        if CURSOR_ANNOTATION in ((workload.obj.get("metadata") or {}).get("annotations") or {}):
            return
        self.log.info(
            "%s %s/%s finished while no trigger relayed its log; its pods' logs:",
            self.kind,
            namespace,
            workload.name,
        )
        if not self._log_pods(client, self.kind, workload.name, workload.uid, namespace):
            self.log.info(
                "no pods of %s %s/%s are left to read its log from", self.kind, namespace, workload.name
            )

    def _return_existing(self, decision: ReturnResult, namespace: str) -> dict[str, Any]:
        from airflow_k8s_ml.operators.outcome import result_payload

        if decision.cached is not None or decision.workload is None:
            self.log.info("%s already succeeded for this task instance; returning its result", self.kind)
            return dict(decision.cached or {})
        workload = decision.workload
        self.log.info(
            "%s %s/%s (attempt %d) already succeeded; returning its result without relaunching",
            self.kind,
            namespace,
            workload.name,
            workload.attempt,
        )
        identity = {"kind": self.kind, "name": workload.name, "namespace": namespace, "uid": workload.uid}
        result = result_payload(identity, workload.state, workload.attempt, workload.resumed_from)
        record = record_of(workload, namespace, self.api_version, self.kind)
        return {**result, **self.workload.collect(self._client(namespace), record)}

    def _launch(
        self, client: KubeClient, args: WorkloadArgs[Any], key: RunKey, namespace: str, decision: Launch
    ) -> WorkloadRecord:
        from airflow_k8s_ml.kube.errors import ApiError
        from airflow_k8s_ml.operators._adopt import WorkloadRecord

        if decision.previous is not None:
            self.log.info(
                "previous attempt %d (%s) ended %s; launching attempt %d",
                decision.previous.attempt,
                decision.previous.name,
                decision.previous.state.summary(),
                decision.attempt,
            )
        resume_uri = self._resolve_resume(args)
        placement = self._placement(args, replace(key, attempt=decision.attempt), namespace, resume_uri)
        obj = self._render_object(args, placement)
        submitted_at = time.time()
        try:
            created = client.create(obj)
        except ApiError as exc:
            if not exc.conflict:
                raise
            # Same deterministic name already there: a concurrent or half-recorded launch. Adopt, never twin.
            created = client.get(self.api_version, self.kind, placement.name, namespace) or {}
        meta = created.get("metadata") or {}
        self.log.info("created %s %s/%s (uid %s)", self.kind, namespace, placement.name, meta.get("uid"))
        if self._declared("disruption_budget") and meta.get("uid"):
            self._create_budget(client, {**obj, "metadata": {**obj["metadata"], **meta}}, str(meta["uid"]))
        return WorkloadRecord(
            kind=self.kind,
            api_version=self.api_version,
            name=placement.name,
            namespace=namespace,
            uid=str(meta.get("uid", "")),
            attempt=decision.attempt,
            submitted_at=submitted_at,
            resumed_from=resume_uri,
        )

    def _create_budget(self, client: KubeClient, created: Mapping[str, Any], uid: str) -> None:
        """The run's PodDisruptionBudget (``disruption_budget``), owned by the workload so it goes with it.
        Created right after the workload: its pods do not run yet, so no drain can slip between the two.
        Already there (a relaunch of the same name): kept."""
        from airflow_k8s_ml.kube.errors import ApiError
        from airflow_k8s_ml.manifests.disruption_budget import disruption_budget

        budget = disruption_budget(created, owner_uid=uid)
        try:
            client.create(budget)
        except ApiError as exc:
            if not exc.conflict:
                raise
        spec = budget["spec"]
        self.log.info(
            "created PodDisruptionBudget %s/%s (minAvailable %s: a drain waits until the run ends)",
            created["metadata"].get("namespace"),
            budget["metadata"]["name"],
            spec["minAvailable"],
        )

    def _resolve_resume(self, args: WorkloadArgs[Any]) -> str | None:
        if not args.resume_from:
            return None
        from airflow_k8s_ml.checkpoints.resume import resolve_resume

        return resolve_resume(args.resume_from, args.checkpoint_uri, self.aws_conn_id, self.log)

    # -- finish -----------------------------------------------------------------------------------------
    def execute_complete(
        self, context: Context, event: Mapping[str, Any], record: Mapping[str, Any] | None = None
    ) -> Any:
        """Resume after the trigger fired: rebuild the typed event and finish."""
        from airflow_k8s_ml.errors import K8sMLError
        from airflow_k8s_ml.operators._adopt import WorkloadRecord
        from airflow_k8s_ml.triggers.events import WorkloadEvent

        workload = WorkloadRecord.from_dict(record) or self._stored(context)
        if workload is None:
            raise K8sMLError(
                "resumed without a workload identity (no record in the event or task_state_store)"
            )
        result = self._finish(context, workload, WorkloadEvent.from_payload(event))
        return self.workload.result(self._arguments(self.manifest), result)

    def _finish(self, context: Context, record: WorkloadRecord, event: WorkloadEvent) -> dict[str, Any]:
        """succeeded -> XCom (cached for retries), cleanup per ``on_finish``; anything else -> diagnostics
        into the task log, delete on a deadline (always) or a failure (``on_finish="delete"``), raise."""
        from airflow_k8s_ml.operators.outcome import result_payload
        from airflow_k8s_ml.triggers.sync_wait import raise_for_event, settled_state

        self._record = record
        client = self._client(record.namespace)
        if event.outcome != "succeeded":
            self._remember_outcome(context, record, event)
            delete = event.outcome == "deadline" or (event.outcome == "failed" and self.on_finish == "delete")
            raise_for_event(client, record, event, self.log, delete=delete, lines=self.log_lines)
        state = settled_state(client, record, event.workload_state)
        result = result_payload(
            record.identity(), state, record.attempt, record.resumed_from, event.admitted_at
        )
        result.update(self.workload.collect(client, record))  # before on_finish may delete the pods
        result["disruptions"] = self._disruptions(event)
        self._remember(context, replace(record, result=result))
        self.log.info("%s %s/%s succeeded (%s)", record.kind, record.namespace, record.name, result["reason"])
        if self.on_finish in ("delete", "delete_on_success"):
            client.delete(record.api_version, record.kind, record.name, record.namespace, uid=record.uid)
            self.log.info(
                "deleted %s %s/%s (on_finish=%s)", record.kind, record.namespace, record.name, self.on_finish
            )
        return result

    def _disruptions(self, event: WorkloadEvent) -> dict[str, Any]:
        """The XCom's ``disruptions``: the count and the time lost
        (:func:`~airflow_k8s_ml.status.disruption.summary`), measured against the commit times of the
        checkpoints under ``checkpoint_uri`` (read only when there was a disruption; unreadable: each
        disruption's lost time counts from its pod's start)."""
        from airflow_k8s_ml.status.disruption import Disruption, summary

        disruptions = [Disruption.from_payload(d) for d in event.disruptions]
        if not disruptions:
            return summary([])
        return summary(disruptions, self._checkpoint_times())

    def _checkpoint_times(self) -> list[str]:
        uri = self._declared("checkpoint_uri")
        if not uri:
            return []
        from airflow_k8s_ml.checkpoints import CheckpointStore

        try:
            store = CheckpointStore(str(uri), aws_conn_id=self.aws_conn_id)
            return [c.created_at for c in store.list() if c.complete and c.created_at]
        except Exception as exc:  # the figure is a nicety: the task's outcome never depends on it
            self.log.warning("could not read the checkpoints under %s for the lost time: %s", uri, exc)
            return []

    def _remember_outcome(self, context: Context, record: WorkloadRecord, event: WorkloadEvent) -> None:
        """Leave how the attempt ended in ``task_state_store`` (the Training tab shows where it stopped and
        how often the cluster took its pods)."""
        from airflow_k8s_ml.operators.outcome import OUTCOME_KEY, outcome_record

        store = context.get("task_state_store")
        if store is not None:
            outcome = outcome_record(
                record.attempt, event.outcome, event.workload_state, event.expired_deadline, time.time()
            )
            outcome["disruptions"] = self._disruptions(event)
            store.set(OUTCOME_KEY, outcome)


def _with_env(container: Mapping[str, Any], injected: Mapping[str, str], where: str) -> list[dict[str, Any]]:
    """A raw manifest container's env with ours first; one it already sets is an error naming it."""
    existing = list(container.get("env") or [])
    names = {item.get("name"): "" for item in existing if isinstance(item, Mapping)}
    check_injected_env({"env": names}, injected, f"{where}.")
    return [{"name": k, "value": v} for k, v in injected.items()] + existing
