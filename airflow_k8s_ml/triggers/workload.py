"""``WorkloadTrigger``: wait in the triggerer for a Job, PyTorchJob (or Deployment rollout) to finish.

How it waits (the cncf ``KubernetesJobTrigger`` polls every 10 s over a new TLS connection each time):

- the workload and its pods come from two *shared* watches of the triggerer process (:mod:`.kube.watch`):
  one on the workload's resource in its namespace, one on pods carrying the workload-name label; a change
  wakes this trigger, which re-reads the latest objects and classifies them with ``status.classify``;
- phased deadlines are checked on every change and on a timer set to the next expiry, so an expiry is
  noticed within milliseconds (:mod:`.deadlines`);
- while pods run, their logs are relayed into the trigger's log, prefixed by replica (:mod:`.logs`), and
  the relay's cursor is persisted on the workload (:mod:`.log_cursor`), so a trigger restarted after a
  triggerer crash resumes after the last relayed line instead of replaying or skipping lines;
- an API server that stays unreachable for ``[airflow_k8s_ml] api_unreachable_timeout`` (15 min) ends the
  wait with an error naming the endpoint and the last error (the retry adopts the workload if it runs);
- exactly one :class:`~.events.WorkloadEvent` is yielded: succeeded, failed (with the failed pods, first
  failure first), deadline (the phase, the budget, the reason), or error.

``on_kill`` (the user marked the task failed/success or cleared it) deletes the workload with Foreground
propagation; ``cleanup`` (every exit, including a triggerer restart) never does. Only the connection id is
serialised, never kubeconfig contents. Heavy clients are imported inside ``run``, in a worker thread
(:func:`~airflow_k8s_ml.kube.async_client.load_clients`), so neither importing this module nor starting the
first trigger of a triggerer blocks its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_k8s_ml.kube.resources import Resource, pod_label_key, resource_for
from airflow_k8s_ml.status import WorkloadState, classify, deadline_phase
from airflow_k8s_ml.triggers.deadlines import (
    Deadlines,
    Expiry,
    PhaseClock,
    check_deadlines,
    next_expiry_at,
    phase_hints,
    phase_reason,
)
from airflow_k8s_ml.triggers.diagnostics import MAX_PODS, failed_pods, failure_message, pod_report
from airflow_k8s_ml.triggers.events import WorkloadEvent

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.async_client import AsyncKube
    from airflow_k8s_ml.kube.watch import Subscription
    from airflow_k8s_ml.triggers.log_cursor import CursorWriter
    from airflow_k8s_ml.triggers.logs import LogRelay

__all__ = ["WorkloadTrigger"]

CLASSPATH = "airflow_k8s_ml.triggers.workload.WorkloadTrigger"
#: Re-evaluate at least this often even without changes (belt and braces; a watch delivers changes).
HEARTBEAT = 60.0
#: How long finished containers' log streams may take to deliver their last lines before the event.
LOG_DRAIN = 1.0
KILL_TIMEOUT = 20.0
#: How often to re-GET a workload the watch does not show (yet).
REFETCH = 5.0
#: ``[airflow_k8s_ml] api_unreachable_timeout`` when the option is not set: 15 minutes.
API_UNREACHABLE_TIMEOUT = 900.0


def api_unreachable_timeout() -> float:
    """Seconds an API server may stay unreachable before a wait fails (the provider's config, else 15 min)."""
    from airflow.configuration import conf

    try:
        value = conf.getfloat("airflow_k8s_ml", "api_unreachable_timeout", fallback=API_UNREACHABLE_TIMEOUT)
    except (ValueError, TypeError):
        return API_UNREACHABLE_TIMEOUT
    return value if value > 0 else API_UNREACHABLE_TIMEOUT


def _uid(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    """The pod belongs to this workload instance (a same-name predecessor's pods are ignored)."""
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return not refs or not uid or any(ref.get("uid") == uid for ref in refs)


class WorkloadTrigger(BaseTrigger):
    """Wait for ``kind`` ``namespace/name`` (``uid``) to finish, with phased deadlines and live logs.

    :param kind: Job | PyTorchJob | Deployment (rollout) | CronJob (deadlines only); ``api_version``
        defaults per kind (batch/v1, kubeflow.org/v1, apps/v1).
    :param uid: the instance waited for; "" accepts whatever object has the name (sensors).
    :param deadlines: :meth:`Deadlines.to_payload` of the budgets.
    :param task_started_at: epoch seconds the task started (the overall budget counts from it).
    :param log_cursor: per replica, the last line already relayed (a resumed relay starts after it).
    :param try_number: the Airflow try waiting; set, the relay's cursor is persisted on the workload for this
        try and read back when a trigger of the same try (re)starts (None: kept in memory only, e.g. a
        sensor watching somebody else's workload).
    :param poll_interval: LIST period if the cluster refuses watches (the only time we poll).
    :param delete_on_kill: delete the workload (Foreground) when the user kills the task.
    """

    def __init__(
        self,
        *,
        kind: str,
        name: str,
        namespace: str,
        uid: str,
        kubernetes_conn_id: str = "kubernetes_default",
        deadlines: dict[str, Any] | None = None,
        task_started_at: float,
        stream_logs: bool = True,
        log_cursor: dict[str, Any] | None = None,
        poll_interval: float = 30.0,
        delete_on_kill: bool = True,
        api_version: str | None = None,
        try_number: int | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deadlines = Deadlines.from_payload(deadlines).to_payload() if deadlines else None
        self.task_started_at = float(task_started_at)
        self.stream_logs = stream_logs
        self.log_cursor = log_cursor
        self.poll_interval = float(poll_interval)
        self.delete_on_kill = delete_on_kill
        self.api_version = api_version
        self.try_number = int(try_number) if try_number is not None else None
        self.resource: Resource = resource_for(api_version, kind)
        self._seen_uid = uid
        self._relay: LogRelay | None = None
        self._cursor_writer: CursorWriter | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "kind": self.kind,
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "deadlines": self.deadlines,
                "task_started_at": self.task_started_at,
                "stream_logs": self.stream_logs,
                "log_cursor": self.log_cursor,
                "poll_interval": self.poll_interval,
                "delete_on_kill": self.delete_on_kill,
                "api_version": self.api_version,
                "try_number": self.try_number,
            },
        )

    # -- run --------------------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            event = await self._wait()
        except Exception as exc:  # the wait broke (not the workload): say so instead of a bare traceback
            self.log.exception("waiting for %s %s/%s failed", self.kind, self.namespace, self.name)
            message = f"waiting for {self._what()} failed: {exc}"
            event = self._event("error", WorkloadState("pending"), message)
        yield TriggerEvent(event.to_payload())

    async def _wait(self) -> WorkloadEvent:
        from airflow_k8s_ml.kube.async_client import get_kube
        from airflow_k8s_ml.kube.watch import WatchKey, get_registry

        kube = await get_kube(self.kubernetes_conn_id)
        registry = get_registry()
        wake = asyncio.Event()
        key = WatchKey(self.kubernetes_conn_id, self.resource, self.namespace)
        async with contextlib.AsyncExitStack() as stack:
            workload = await stack.enter_async_context(
                registry.subscribe(key, self.name, wake, kube=kube, poll_interval=self.poll_interval)
            )
            stack.push_async_callback(self._close_relay)
            waiter = _Waiter(self, kube, workload, wake, stack, api_unreachable_timeout())
            while True:
                wake.clear()
                event = await waiter.evaluate()
                if event is not None:
                    return event
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), waiter.sleep_for(time.time()))

    def _what(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def _event(
        self,
        outcome: str,
        state: WorkloadState,
        message: str,
        *,
        deadline_phase: str | None = None,
        pods: list[dict[str, Any]] | None = None,
        warnings: list[str] | None = None,
    ) -> WorkloadEvent:
        cursor = dict(self._relay.cursor) if self._relay is not None else self.log_cursor
        return WorkloadEvent(
            outcome=outcome,
            kind=self.kind,
            name=self.name,
            namespace=self.namespace,
            uid=self._seen_uid,
            state=state.to_payload(),
            message=message,
            deadline_phase=deadline_phase,
            log_cursor=cursor or None,
            pods=pods or [],
            warnings=warnings or [],
        )

    async def _close_relay(self) -> None:
        """Stop the log streams, then persist the last cursor (a clean exit replays nothing)."""
        if self._relay is not None:
            await self._relay.close()
        if self._cursor_writer is not None:
            await self._cursor_writer.flush()
            await self._cursor_writer.close()

    # -- exits ------------------------------------------------------------------------------------------
    async def on_kill(self) -> None:
        """The user killed the task: delete the workload (Foreground), this uid only."""
        if not self.delete_on_kill:
            return
        from airflow_k8s_ml.kube.async_client import get_kube

        kube = await get_kube(self.kubernetes_conn_id)
        deletion = kube.delete(
            self.resource, self.namespace, self.name, propagation="Foreground", uid=self._seen_uid
        )
        deleted = await asyncio.wait_for(deletion, KILL_TIMEOUT)
        if deleted:
            self.log.info("on_kill: deleting %s (Foreground)", self._what())

    async def cleanup(self) -> None:
        """Every exit, including a triggerer restart: release local resources, never the workload."""
        await self._close_relay()


class _Waiter:
    """The state of one wait: the subscriptions, the phase clock, the log relay; decides the outcome."""

    def __init__(
        self,
        trigger: WorkloadTrigger,
        kube: AsyncKube,
        workload: Subscription,
        wake: asyncio.Event,
        stack: contextlib.AsyncExitStack,
        unreachable_timeout: float = API_UNREACHABLE_TIMEOUT,
    ) -> None:
        self.t = trigger
        self.kube = kube
        self.workload = workload
        self.wake = wake
        self.stack = stack
        self.pods_sub: Subscription | None = None
        self.deadlines = Deadlines.from_payload(trigger.deadlines)
        self.clock = PhaseClock()
        self.fetched: dict[str, Any] | None = None
        self.fetched_at: float | None = None
        self.warned_pods = False
        self.unreachable_timeout = unreachable_timeout

    def _subscriptions(self) -> list[Subscription]:
        return [self.workload] if self.pods_sub is None else [self.workload, self.pods_sub]

    def _unreachable_for(self) -> tuple[float, Subscription] | None:
        """How long (loop seconds) the API server has not answered our watches, and through which one."""
        now = asyncio.get_running_loop().time()
        down = [(now - sub.unreachable_since, sub) for sub in self._subscriptions() if sub.unreachable_since]
        return max(down, key=lambda item: item[0]) if down else None

    def sleep_for(self, now: float) -> float:
        """Until the next deadline, or the heartbeat; short while the watches are still listing; no later
        than the moment an unreachable API server exhausts its budget."""
        return min(self._sleep_for(now), self._unreachable_budget_left())

    def _unreachable_budget_left(self) -> float:
        down = self._unreachable_for()
        return HEARTBEAT if down is None else max(self.unreachable_timeout - down[0], 0.0) + 0.001

    def _sleep_for(self, now: float) -> float:
        pods_listing = self.pods_sub is not None and not self.pods_sub.synced and self.pods_sub.error is None
        if not self.workload.synced or pods_listing:
            return 1.0
        if self.clock.phase is None or self.deadlines.is_empty():
            return HEARTBEAT
        expires = next_expiry_at(
            self.deadlines,
            task_started_at=self.t.task_started_at,
            phase=self.clock.phase,
            phase_since=self.clock.since,
            running_since=self.clock.running_since,
        )
        return HEARTBEAT if expires is None else min(max(expires - now, 0.0) + 0.001, HEARTBEAT)

    def _unreachable(self) -> WorkloadEvent | None:
        """The error event once the API server has been unreachable for the whole budget."""
        down = self._unreachable_for()
        if down is None or down[0] < self.unreachable_timeout:
            return None
        from datetime import timedelta

        from airflow_k8s_ml.triggers.deadlines import format_limit

        elapsed, sub = down
        budget = format_limit(timedelta(seconds=self.unreachable_timeout))
        message = (
            f"API server {sub.endpoint} unreachable for {format_limit(timedelta(seconds=round(elapsed)))} "
            f"(api_unreachable_timeout {budget}) while waiting for {self.t._what()}; last error: "
            f"{sub.last_error}. The {self.t.kind} may still be running: a retry adopts it if so."
        )
        self.t.log.error("%s", message)
        return self.t._event("error", WorkloadState("pending"), message)

    async def evaluate(self) -> WorkloadEvent | None:
        unreachable = self._unreachable()
        if unreachable is not None:
            return unreachable
        if self.workload.error is not None:
            message = f"cannot watch {self.t.resource.plural} in {self.t.namespace}: {self.workload.error}"
            return self.t._event("error", WorkloadState("pending"), message)
        if not self.workload.synced:
            return None
        obj = await self._workload()
        if obj is None:
            return self._vanished()
        if self.t.uid and _uid(obj) != self.t.uid:
            message = f"{self.t._what()} was replaced (uid {_uid(obj)}, waited for {self.t.uid})"
            return self.t._event("error", classify(obj, self.t.kind), message)
        self.t._seen_uid = _uid(obj)
        state = classify(obj, self.t.kind)
        pods = await self._pods(obj)
        if pods is None:
            return None
        if self.t._relay is not None:
            self.t._relay.update(pods)
        if state.terminal:
            return await self._finished(obj, state, pods)
        return await self._check_deadlines(obj, state, pods)

    async def _workload(self) -> dict[str, Any] | None:
        """The latest object. Absent from the synced cache without having been seen deleted means the watch
        may lag a just-created object: a GET decides (again at most every :data:`REFETCH` seconds)."""
        obj = self.workload.get(self.t.name)
        if obj is not None or self.t.name in self.workload.tombstones:
            return obj
        now = time.monotonic()
        if self.fetched_at is None or now - self.fetched_at >= REFETCH:
            self.fetched_at = now
            self.fetched = await self.kube.get(self.t.resource, self.t.namespace, self.t.name)
        return self.fetched

    def _vanished(self) -> WorkloadEvent:
        """Gone: report its last state if that was terminal (deleted right after finishing, e.g. TTL 0)."""
        last = self.workload.tombstones.get(self.t.name)
        if last is not None and (not self.t.uid or _uid(last) == self.t.uid):
            state = classify(last, self.t.kind)
            if state.terminal:
                outcome = "succeeded" if state.succeeded else "failed"
                return self.t._event(outcome, state, f"{self.t._what()} {state.summary()} (then deleted)")
        return self.t._event("error", WorkloadState("pending"), f"{self.t._what()} was deleted while waiting")

    async def _pods(self, obj: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The workload's current pods from the shared pod watch; None until that watch has listed."""
        label = pod_label_key(self.t.kind, obj)
        if label is None:
            return []
        if self.pods_sub is None:
            from airflow_k8s_ml.kube.watch import WatchKey, get_registry

            key = WatchKey(self.t.kubernetes_conn_id, resource_for("v1", "Pod"), self.t.namespace, label)
            self.pods_sub = await self.stack.enter_async_context(
                get_registry().subscribe(key, self.t.name, self.wake, kube=self.kube)
            )
            if self.t.stream_logs:
                self.t._relay = self._new_relay(obj)
        if self.pods_sub.error is not None:
            if not self.warned_pods:  # e.g. no RBAC to list pods: wait on the workload alone
                self.warned_pods = True
                self.t.log.warning("cannot watch pods of %s: %s", self.t._what(), self.pods_sub.error)
            return []
        if not self.pods_sub.synced:
            return None
        uid = _uid(obj)
        return [pod for pod in self.pods_sub.objects().values() if _owned_by(pod, uid)]

    def _new_relay(self, obj: Mapping[str, Any]) -> LogRelay:
        """The log relay, resuming after the furthest of the kwargs' cursor and the one a previous trigger
        of this try persisted on the workload (read from the watch cache: no request)."""
        from airflow_k8s_ml.triggers.log_cursor import CursorWriter, merge_cursors, read_cursor
        from airflow_k8s_ml.triggers.logs import LogRelay

        t = self.t
        persisted = read_cursor(obj, t.try_number)
        if persisted:
            t.log.info("resuming the log relay after the last line relayed for try %s", t.try_number)
        relay = LogRelay(self.kube, t.namespace, t.log, cursor=merge_cursors(t.log_cursor, persisted))
        if t.try_number is not None:
            writer = CursorWriter(
                self.kube, t.resource, t.namespace, t.name, t.try_number, lambda: relay.cursor, t.log
            )
            relay.on_relayed = writer.mark
            t._cursor_writer = writer
        return relay

    async def _finished(
        self, obj: Mapping[str, Any], state: WorkloadState, pods: list[dict[str, Any]]
    ) -> WorkloadEvent:
        relay = self.t._relay
        if relay is not None:
            await relay.drain(LOG_DRAIN)
        if self.t._cursor_writer is not None:  # before the event: a crash after it replays nothing
            await self.t._cursor_writer.flush()
        if state.succeeded:
            return self.t._event("succeeded", state, f"{self.t._what()} {state.summary()}")
        reports, warnings = await self._diagnose(obj, pods)
        message = failure_message(self.t.kind, self.t.namespace, self.t.name, state, reports)
        return self.t._event("failed", state, message, pods=reports, warnings=warnings)

    async def _check_deadlines(
        self, obj: Mapping[str, Any], state: WorkloadState, pods: list[dict[str, Any]]
    ) -> WorkloadEvent | None:
        now = time.time()
        phase = deadline_phase(state, pods)
        hint_since, hint_running = phase_hints(phase, obj, pods)
        self.clock.observe(phase, now, hint_since=hint_since, hint_running=hint_running)
        times: dict[str, Any] = {
            "now": now,
            "task_started_at": self.t.task_started_at,
            "phase": phase,
            "phase_since": self.clock.since,
            "running_since": self.clock.running_since,
        }
        expiry = check_deadlines(self.deadlines, **times)
        if expiry is not None:  # only now say why (the reason reads every pod)
            expiry = check_deadlines(self.deadlines, **times, reason=phase_reason(phase, state, pods))
        if expiry is None:
            return None
        return await self._expired(obj, state, pods, expiry)

    async def _expired(
        self, obj: Mapping[str, Any], state: WorkloadState, pods: list[dict[str, Any]], expiry: Expiry
    ) -> WorkloadEvent:
        self.t.log.warning("%s: %s", self.t._what(), expiry.message)
        reports, warnings = await self._diagnose(obj, pods)
        return self.t._event(
            "deadline", state, expiry.message, deadline_phase=expiry.phase, pods=reports, warnings=warnings
        )

    async def _diagnose(
        self, obj: Mapping[str, Any], pods: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Failed pods (incl. deleted ones) with their last lines, and Warning events. Never raises."""
        gone = list(self.pods_sub.tombstones.values()) if self.pods_sub is not None else []
        seen = {_uid(p) for p in pods}
        candidates = pods + [p for p in gone if _uid(p) not in seen and _owned_by(p, _uid(obj))]
        reports = []
        for pod in failed_pods(candidates)[:MAX_PODS]:
            lines, relayed = await self._last_lines(pod)
            report = pod_report(pod, lines)
            if relayed:
                report["relayed"] = True  # already in the task log: the operator does not print them again
            reports.append(report)
        warnings: list[str] = []
        try:
            uids = {_uid(obj)} | {_uid(p) for p in candidates}
            warnings = await self.kube.warning_events(self.t.namespace, uids)
        except Exception as exc:
            self.t.log.warning("could not read Warning events of %s: %s", self.t._what(), exc)
        return reports, warnings

    async def _last_lines(self, pod: Mapping[str, Any]) -> tuple[list[str], bool]:
        """The pod's last lines, and whether they were relayed into the task log (from the relay's tail)."""
        from airflow_k8s_ml.triggers.logs import stream_keys

        relay = self.t._relay
        keys = stream_keys(pod)
        if relay is not None:
            lines = [line for _, key in keys for line in relay.last_lines(key)]
            if lines:
                return lines[-20:], True
        if not keys or not (pod.get("status") or {}).get("containerStatuses"):
            return [], False
        name = str((pod.get("metadata") or {}).get("name"))
        try:
            text = await self.kube.log_tail(self.t.namespace, name, keys[0][0], 20)
        except Exception as exc:
            return [f"(no logs: {exc})"], False
        return text.splitlines()[-20:], False
