"""``_Runner``: what every operator of the provider does around the objects it creates, once.

Why a base of its own, below :class:`~airflow_k8s_ml.operators._workload._WorkloadOperator`: the training
and batch Job operators create one workload per attempt, the serving operators apply long-lived objects
(a Deployment and its Service, a CronJob) and sometimes a per-attempt workload besides (the CronJob's
run-now Job). Both need the same machinery around those objects, and it used to be written twice
(``operators/_serving.py`` computed the run key again, the CronJob operator built its trigger and read its
deadlines by hand):

- the run identity (:func:`run_key`) from the task instance;
- the cluster client on the operator's connection;
- submit-or-adopt: the record in ``task_state_store`` first, the run labels as fallback and guard
  (:meth:`_Runner._decide`, :meth:`_Runner._adopt`), the record kept before deferring (:meth:`_remember`);
- the wait: deferred to :class:`~airflow_k8s_ml.triggers.workload.WorkloadTrigger` built by
  :meth:`WaitSettings.trigger <airflow_k8s_ml.operators.wait_settings.WaitSettings.trigger>` (the deadlines
  parsed once by :class:`~airflow_k8s_ml.deadlines.Deadlines`), or polled in the worker by the same report
  (:func:`~airflow_k8s_ml.triggers.sync_wait.poll_until_done`);
- the deferral's timeout from ``execution_timeout`` and its expiry, and ``on_kill``.

A kind of operator is a subclass that decides *what* to create and what its result is; it writes none of
the above. Import-light: imported at DAG parse time, so clients, triggers and status modules load inside the
methods.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.manifests.naming import RunKey
    from airflow_k8s_ml.operators._adopt import Decision, Observed
    from airflow_k8s_ml.operators.record import WorkloadRecord
    from airflow_k8s_ml.operators.wait_settings import WaitSettings
    from airflow_k8s_ml.triggers.events import WorkloadEvent

__all__ = ["POD_LOG_LINES", "_Runner", "run_key"]

#: At most this many last lines, and bytes, per container when the worker logs a finished workload's pods (a
#: retry's backfill, or a workload that ended while the worker followed it): training code's output is
#: bounded like everything read from a pod; each line is cut as the relay cuts it.
POD_LOG_LINES = 10_000
POD_LOG_BYTES = 8 * 1024 * 1024


def run_key(context: Mapping[str, Any]) -> RunKey:
    """The task instance of this execution (``context["ti"]``), attempt 1: the submit-or-adopt decision
    chooses the attempt of a per-run workload; long-lived objects carry no attempt
    (:func:`~airflow_k8s_ml.operators._serving.object_labels`)."""
    from airflow_k8s_ml.manifests.naming import RunKey
    from airflow_k8s_ml.manifests.validation import fail

    ti = context.get("ti") or context.get("task_instance")
    if ti is None:
        raise fail("context", "needs 'ti' (the running task instance) to label objects with the DAG run")
    map_index = getattr(ti, "map_index", -1)
    return RunKey(
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        run_id=ti.run_id,
        map_index=map_index if isinstance(map_index, int) and map_index >= 0 else -1,
    )


class _Runner(BaseOperator):
    """The machinery around what an operator creates; see the module docstring.

    Subclasses set ``kubernetes_conn_id`` (and ``deferrable``, True when they have no such argument).
    """

    kubernetes_conn_id: str
    deferrable: bool = True
    #: Deprecated argument -> the argument that replaced it (both in the signature, the old one warns).
    renamed_arguments: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # The waiting arguments (:meth:`_wait_settings`); an operator without one of them waits by its default.
    admission_timeout: Any = None
    startup_timeout: Any = None
    run_timeout: Any = None
    deadline: Any = None
    poll_interval: Any = 30.0
    stream_logs: bool = True
    log_lines: int = 50
    #: Workload operators take it (default 5); the serving operators wait for no pod to be disrupted.
    max_disruptions: Any = None
    #: Seconds to follow the workload from the worker before deferring (0: defer at once). The operators
    #: whose workloads are often shorter than a deferral's round trip take it as an argument.
    defer_after: float = 0.0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._record: WorkloadRecord | None = None
        self._execute_started = time.time()
        # Set while the worker polls (sync mode); ``on_kill`` sets it to end the wait at once.
        self._stop_wait: threading.Event | None = None
        self._deleted_on_kill = False

    def _keep_arguments(self, given: Mapping[str, Any]) -> None:
        """Keep each argument the public ``__init__`` lists (its signature: explicit, as the project's rule
        wants) as the attribute of the same name, from that ``__init__``'s ``locals()``: the arguments are
        read by one rule, not by a hand-written assignment per argument. A deprecated name
        (:attr:`renamed_arguments`) is read into its new one, with the deprecation warning."""
        import inspect

        from airflow_k8s_ml.operators._args import renamed_argument

        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in self.renamed_arguments:
                setattr(self, name, given[name])
        for old, new in self.renamed_arguments.items():
            setattr(self, new, renamed_argument(new, given[new], old, given[old]))

    def _wait_settings(self, args: Any = None, *, templated_ok: bool = False) -> WaitSettings:
        """The waiting arguments, rendered, parsed once: the deadlines go to the trigger as they are
        (``templated_ok``: the parse-time check, templated values left for ``execute``). ``args``: the
        arguments as read (their ``deadline``), else the attributes."""
        from airflow_k8s_ml.operators.wait_settings import WaitSettings

        return WaitSettings.build(
            kubernetes_conn_id=self.kubernetes_conn_id,
            admission_timeout=self.admission_timeout,
            startup_timeout=self.startup_timeout,
            run_timeout=self.run_timeout,
            deadline=self.deadline if args is None else args.deadline,
            poll_interval=self.poll_interval,
            stream_logs=self.stream_logs,
            log_lines=self.log_lines,
            max_disruptions=self.max_disruptions,
            templated_ok=templated_ok,
        )

    # -- identity and client ----------------------------------------------------------------------------
    def _run_key(self, context: Context) -> RunKey:
        return run_key(context)

    def _client(self, namespace: str | None) -> KubeClient:
        from airflow_k8s_ml.kube.sync_client import KubeClient

        return KubeClient(self.kubernetes_conn_id, namespace)

    # -- submit or adopt --------------------------------------------------------------------------------
    def _stored(self, context: Context) -> WorkloadRecord | None:
        from airflow_k8s_ml.operators._adopt import STATE_KEY, WorkloadRecord

        store = context.get("task_state_store")
        return WorkloadRecord.from_dict(store.get(STATE_KEY)) if store is not None else None

    def _remember(self, context: Context, record: WorkloadRecord) -> None:
        """Persist the identity before deferring, so a crashed worker's retry finds it (ResumableJobMixin);
        ``on_kill`` deletes what is remembered."""
        from airflow_k8s_ml.operators._adopt import STATE_KEY

        self._record = record
        store = context.get("task_state_store")
        if store is not None:
            store.set(STATE_KEY, record.to_dict())
        else:
            self.log.warning("task_state_store not available; the run labels alone will guard re-attachment")

    def _decide(
        self, context: Context, client: KubeClient, key: RunKey, namespace: str, api_version: str, kind: str
    ) -> Decision:
        """Adopt, return or launch (:func:`~airflow_k8s_ml.operators._adopt.decide`), from the stored record
        and the objects of ``kind`` carrying this task instance's labels."""
        from airflow_k8s_ml.operators._adopt import decide, observe

        found = [
            observe(obj, kind) for obj in client.list(api_version, kind, namespace, key.label_selector())
        ]
        return decide(self._stored(context), found)

    def _adopt(
        self, context: Context, workload: Observed, namespace: str, api_version: str, kind: str
    ) -> WorkloadRecord:
        """The record of an active workload found for this task instance; its deadlines keep counting from
        the stored submission (or its creation), not from now."""
        stored = self._stored(context)
        self.log.info(
            "adopting active %s %s/%s (attempt %d, %s) instead of launching a new one",
            kind,
            namespace,
            workload.name,
            workload.attempt,
            workload.state.summary(),
        )
        submitted_at = stored.submitted_at if stored is not None and stored.uid == workload.uid else None
        return record_of(workload, namespace, api_version, kind, submitted_at)

    # -- waiting ----------------------------------------------------------------------------------------
    def _wait(
        self,
        context: Context,
        client: KubeClient,
        record: WorkloadRecord,
        settings: WaitSettings,
        *,
        delete_on_kill: bool,
        method_name: str = "execute_complete",
        kwargs: Mapping[str, Any] | None = None,
    ) -> WorkloadEvent:
        """Defer to the trigger (``deferrable``; never returns) or poll in the worker; either way the event
        comes from the one report (``status.wait_report``). A kill that came before the wait (between
        submit and here) fails it at once, as one during the wait does."""
        if self._deleted_on_kill:
            self._raise_killed(record)
        if self.deferrable:
            followed = self._follow(client, record, settings)
            if self._deleted_on_kill:  # killed while the worker followed: fail as a killed wait does
                self._raise_killed(record)
            if followed is not None:
                return followed
            try_number = getattr(context["ti"], "try_number", None)
            self.defer(
                trigger=settings.trigger(
                    record,
                    delete_on_kill=delete_on_kill,
                    try_number=try_number if isinstance(try_number, int) else None,
                ),
                method_name=method_name,
                kwargs=dict(kwargs or {"record": record.to_dict()}),
                timeout=self._deferral_timeout(context),
            )
        from airflow_k8s_ml.triggers.sync_wait import poll_until_done

        self._stop_wait = threading.Event()
        try:
            event = poll_until_done(client, record, settings, self.log, stop=self._stop_wait)
        finally:
            self._stop_wait = None
        if self._deleted_on_kill:
            self._raise_killed(record)
        return event

    def _follow(
        self, client: KubeClient, record: WorkloadRecord, settings: WaitSettings
    ) -> WorkloadEvent | None:
        """The workload's end as the trigger would report it, if it comes within ``defer_after`` seconds of
        following it from the worker (a watch on it, each version judged by the one wait report); None:
        defer. A workload that ended here costs no hand-over to the triggerer and no second worker start
        (2-3 s a task on the HA stack, ``bench/dag_overhead.py``). Its pods' lines are logged once it has
        ended; when it defers the worker has logged none, so the trigger relays them from the first: each
        line once either way."""
        if self.defer_after <= 0:
            return None
        import itertools

        from airflow_k8s_ml.kube.serving_ops import watch_versions
        from airflow_k8s_ml.triggers.sync_wait import follow

        what = f"{record.kind} {record.namespace}/{record.name}"
        try:
            obj = client.get(record.api_version, record.kind, record.name, record.namespace)
            if obj is None:  # gone already: the trigger's replay tells how it ended
                return None
            versions = itertools.chain([obj], watch_versions(client, obj, self.defer_after))
            event = follow(client, record, settings, self.log, versions)
        except Exception as exc:  # the trigger will wait instead; never fail a task over this watch
            self.log.warning("following %s in the worker failed (%s); deferring", what, exc)
            return None
        if event is None:
            self.log.info("%s still running after %gs; deferring to the triggerer", what, self.defer_after)
            return None
        if settings.stream_logs:
            self._log_pods(client, record.kind, record.name, record.uid, record.namespace)
        return event

    def _log_pods(self, client: KubeClient, kind: str, name: str, uid: str, namespace: str) -> bool:
        """Every line of a finished workload's pods, oldest pod first, as the trigger's relay writes them
        (``[replica] line``); False when no pod is left to read (TTL, eviction). Best effort."""
        from airflow_k8s_ml.config import WaitTimings
        from airflow_k8s_ml.status.pod import owned_by
        from airflow_k8s_ml.triggers.log_lines import cut_line
        from airflow_k8s_ml.triggers.logs import stream_keys

        max_line = WaitTimings.configured().max_line  # as the relay cuts lines

        pods = sorted(
            (p for p in client.pods_of(kind, name, namespace) if owned_by(p, uid)),
            key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""),
        )
        for pod in pods:
            pod_name = str((pod.get("metadata") or {}).get("name"))
            for container, replica in stream_keys(pod):
                text = client.log_tail(
                    pod_name, namespace, container, lines=POD_LOG_LINES, limit_bytes=POD_LOG_BYTES
                )
                for line in text.splitlines():
                    self.log.info("[%s] %s", replica, cut_line(line, 0, max_line))
                if len(text.encode("utf-8", "replace")) >= POD_LOG_BYTES:
                    self.log.warning(
                        "[%s] log cut at %d bytes; the whole log: kubectl logs -n %s %s -c %s",
                        replica,
                        POD_LOG_BYTES,
                        namespace,
                        pod_name,
                        container,
                    )
        return bool(pods)

    def _raise_killed(self, record: WorkloadRecord) -> None:
        """The task was killed while the worker waited and ``on_kill`` deleted the workload: fail with the
        kill as the reason (:func:`~airflow_k8s_ml.operators.outcome.killed_message`), not with the state
        the deletion left the workload in."""
        from airflow_k8s_ml.errors import TaskKilled
        from airflow_k8s_ml.operators.outcome import killed_message

        message = killed_message(f"{record.kind} {record.namespace}/{record.name}")
        self.log.error("%s", message)
        raise TaskKilled(message)

    def _deferral_timeout(self, context: Context) -> timedelta | None:
        """What is left of ``execution_timeout`` for this try, as the deferral's timeout.

        Why: Airflow 3.3 applies ``execution_timeout`` only around ``execute``/``execute_complete`` on a
        worker; a deferred task is bounded by the deferral's ``timeout`` alone (the scheduler's
        ``check_trigger_timeouts``). Counting from the try's start (``ti.start_date``), the whole try stays
        within ``execution_timeout``; :meth:`resume_execution` turns the expiry into a clean failure.
        """
        from datetime import datetime

        if self.execution_timeout is None:
            return None
        start = getattr(context["ti"], "start_date", None)
        started = start.timestamp() if isinstance(start, datetime) else self._execute_started
        remaining = self.execution_timeout.total_seconds() - (time.time() - started)
        return timedelta(seconds=max(remaining, 1.0))

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """Resume after the deferral; a deferral that timed out (``execution_timeout`` spent while waiting
        in the triggerer) deletes the remembered workload and fails with a message saying so.

        Airflow raises ``TaskDeferralTimeout`` here, before any method of ours runs, and the triggerer
        cancels a timed-out trigger without ``on_kill``: without this the workload would keep running.
        """
        from airflow.sdk.exceptions import AirflowTaskTimeout, TaskDeferralTimeout

        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except TaskDeferralTimeout as exc:
            record = self._stored(context)
            what = f"{record.kind} {record.namespace}/{record.name}" if record is not None else self.task_id
            if record is not None:
                from airflow_k8s_ml.triggers.sync_wait import delete_and_wait

                self._record = record
                delete_and_wait(self._client(record.namespace), record, self.log)
            message = (
                f"execution_timeout {self.execution_timeout} exceeded while waiting in the triggerer for "
                f"{what}" + ("; deleted it" if record is not None else "")
            )
            self.log.error("%s", message)
            raise AirflowTaskTimeout(message) from exc

    def on_kill(self) -> None:
        """A user killed the task while it ran in a worker (sync mode, or between submit and defer): delete
        the remembered workload so nothing keeps running for a task Airflow considers over. Long-lived
        objects (a Deployment serving traffic) are never remembered, so never deleted."""
        record = self._record
        if record is None:
            return
        client = self._client(record.namespace)
        if client.delete(record.api_version, record.kind, record.name, record.namespace, uid=record.uid):
            self._deleted_on_kill = True
            self.log.info("on_kill: deleted %s %s/%s", record.kind, record.namespace, record.name)
        if self._stop_wait is not None:  # the worker's wait: end it now, with the kill as the reason
            self._stop_wait.set()


def record_of(
    workload: Observed, namespace: str, api_version: str, kind: str, submitted_at: float | None = None
) -> WorkloadRecord:
    """The record of a workload found on the cluster (adopted, or already done). Its deadlines count from
    ``submitted_at`` when a stored record knows it, else from the object's creation: never from now, which
    would hand an adopted workload a fresh budget."""
    from airflow_k8s_ml.operators._adopt import WorkloadRecord

    return WorkloadRecord(
        kind=kind,
        api_version=api_version,
        name=workload.name,
        namespace=namespace,
        uid=workload.uid,
        attempt=workload.attempt,
        submitted_at=submitted_at or created_at(workload.obj) or time.time(),
        resumed_from=workload.resumed_from,
    )


def created_at(obj: Mapping[str, Any]) -> float | None:
    """``metadata.creationTimestamp`` as epoch seconds (None when absent or unreadable)."""
    from datetime import datetime

    text = (obj.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
