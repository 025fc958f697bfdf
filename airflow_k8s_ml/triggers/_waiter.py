"""The wait of a :class:`~airflow_k8s_ml.triggers.workload.WorkloadTrigger`: subscriptions, log relay,
the unreachable-API budget, and the one event that ends it.

An I/O shell around :func:`airflow_k8s_ml.status.wait_report.report` (which decides with
:func:`~airflow_k8s_ml.status.decide` and says what to log and gather): it fetches a look from the shared
watches (the workload, its tombstone if the watch saw it deleted, its pods, a queued job's Kueue Workloads),
logs the report's lines, gathers the diagnostics it asks for (last lines from the relay's tail, else the
API) and sends :func:`~airflow_k8s_ml.triggers.diagnostics.final_event`. The worker's wait
(:mod:`airflow_k8s_ml.waiting.looker`) is the same shell over GETs. The trigger hands in what the wait needs -
a :class:`WaitSpec`, the :class:`LogState` it shares with the trigger's exits, and its logger - so nothing
here reads the trigger's state.

Why a module of its own: everything here (status classifiers, diagnostics, watches, the async client) is
imported by the trigger's first ``run`` in a worker thread, so the triggerer imports
:mod:`~airflow_k8s_ml.triggers.workload` - on its event loop - cheaply. See that module for how it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.config import WaitTimings
from airflow_k8s_ml.deadlines import Deadlines, format_limit
from airflow_k8s_ml.kube.async_client import get_kube, load_clients
from airflow_k8s_ml.kube.resources import pod_label_key, resource_for
from airflow_k8s_ml.kube.watch import Subscription, WatchKey, get_registry
from airflow_k8s_ml.status.disruption import count_text
from airflow_k8s_ml.status.kueue import JOB_UID_LABEL, PositionAsked, queued_job_uid
from airflow_k8s_ml.status.pod import owned_by
from airflow_k8s_ml.status.wait import Target, uid_of
from airflow_k8s_ml.status.wait_report import (
    STUCK_TAIL_LINES,
    Diagnose,
    Look,
    Said,
    events_ask,
    position_ask,
    report,
)
from airflow_k8s_ml.triggers.diagnostics import final_event, log_source, pod_report, pods_to_read
from airflow_k8s_ml.triggers.disruption_ledger import persist_disruptions, read_disruptions
from airflow_k8s_ml.triggers.events import WorkloadEvent
from airflow_k8s_ml.triggers.log_cursor import CursorWriter, merge_cursors, read_cursor
from airflow_k8s_ml.triggers.log_ledger import logged_cursor
from airflow_k8s_ml.triggers.logs import LogRelay, stream_keys

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.async_client import AsyncKube
    from airflow_k8s_ml.kube.resources import Resource

__all__ = ["LogState", "Timings", "WaitSpec", "wait"]

#: The longest a wait waits for Kueue's visibility API to answer (its GET is retried like any other).
POSITION_TIMEOUT = 5.0
#: The wait's timings (heartbeat, refetch, log drain, longest relayed line, position refresh, unreachable
#: API budget): the provider's waiting options, parsed once for both waits.
Timings = WaitTimings


@dataclass(frozen=True)
class WaitSpec:
    """What to wait for and how, from the trigger's kwargs (parsed by the trigger, passed in)."""

    target: Target
    resource: Resource
    kubernetes_conn_id: str
    deadlines: Deadlines
    stream_logs: bool = True
    log_cursor: dict[str, Any] | None = None
    try_number: int | None = None
    poll_interval: float = 30.0
    #: The deferred task instance (set by the triggerer): its trigger log files tell how far the relay got.
    task_instance: Any = None


@dataclass
class LogState:
    """The parts of a wait the trigger's exits need too: the log relay and its cursor writer (closed and
    flushed by ``cleanup``), the cursor to report, and the uid actually seen (deleted by ``on_kill``)."""

    seen_uid: str = ""
    relay: LogRelay | None = None
    writer: CursorWriter | None = None
    initial_cursor: dict[str, Any] | None = None

    def cursor(self) -> dict[str, Any] | None:
        return dict(self.relay.cursor) if self.relay is not None else self.initial_cursor

    async def close(self) -> None:
        """Stop the log streams, then persist the last cursor (a clean exit replays nothing)."""
        if self.relay is not None:
            await self.relay.close()
        if self.writer is not None:
            await self.writer.flush()
            await self.writer.close()


async def wait(spec: WaitSpec, logs: LogState, log: Any) -> WorkloadEvent:
    """Wait for ``spec``'s workload until one event decides it."""
    await load_clients()
    kube = await get_kube(spec.kubernetes_conn_id)
    registry = get_registry()
    wake = asyncio.Event()
    key = WatchKey(spec.kubernetes_conn_id, spec.resource, spec.target.namespace)
    async with contextlib.AsyncExitStack() as stack:
        workload = await stack.enter_async_context(
            registry.subscribe(key, spec.target.name, wake, kube=kube, poll_interval=spec.poll_interval)
        )
        stack.push_async_callback(logs.close)
        waiter = Waiter(spec, logs, log, kube, workload, wake, stack, WaitTimings.configured())
        while True:
            wake.clear()
            event = await waiter.evaluate()
            if event is not None:
                return event
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can lose a cancellation that lands as
            # its timeout fires, and the trigger would then wait on after the triggerer cancelled it
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(waiter.sleep_for(time.time())):
                    await wake.wait()


class Waiter:
    """The state of one wait: the subscriptions, what it said so far (:class:`Said`), the log relay."""

    def __init__(
        self,
        spec: WaitSpec,
        logs: LogState,
        log: Any,
        kube: AsyncKube,
        workload: Subscription,
        wake: asyncio.Event,
        stack: contextlib.AsyncExitStack,
        timings: WaitTimings,
    ) -> None:
        self.spec = spec
        self.target = spec.target
        self.logs = logs
        self.log = log
        self.kube = kube
        self.workload = workload
        self.wake = wake
        self.stack = stack
        self.pods_sub: Subscription | None = None
        self.queue_sub: Subscription | None = None  # the job's Kueue Workload (queued jobs only)
        self.said = Said()
        self.recalled = False  # the disruptions an earlier wait of this try persisted were read
        self.next_look_at: float | None = None
        self.fetched: dict[str, Any] | None = None
        self.fetched_at: float | None = None
        self.warned_pods = False
        self.timings = timings
        self.pace = timings.pace()

    def _subscriptions(self) -> list[Subscription]:
        """The watches the API server's reachability is judged by (the optional Kueue one is not)."""
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
        if down is None:
            return self.timings.heartbeat
        return max(self.timings.unreachable - down[0], 0.0) + 0.001

    def _sleep_for(self, now: float) -> float:
        pods_listing = self.pods_sub is not None and not self.pods_sub.synced and self.pods_sub.error is None
        if not self.workload.synced or pods_listing:
            return 1.0
        heartbeat = self.timings.heartbeat
        expires = self.next_look_at
        sleep = heartbeat if expires is None else min(max(expires - now, 0.0) + 0.001, heartbeat)
        asked, queue = self.said.asked, self.said.queue
        if asked is not None and queue is not None and not queue.admitted and not queue.finished:
            sleep = min(sleep, max(asked.at + self.timings.position_refresh - now, 0.0) + 0.001)
        return sleep

    def _unreachable(self) -> WorkloadEvent | None:
        """The error event once the API server has been unreachable for the whole budget."""
        down = self._unreachable_for()
        if down is None or down[0] < self.timings.unreachable:
            return None
        from datetime import timedelta

        elapsed, sub = down
        budget = format_limit(timedelta(seconds=self.timings.unreachable))
        message = (
            f"API server {sub.endpoint} unreachable for {format_limit(timedelta(seconds=round(elapsed)))} "
            f"(api_unreachable_timeout {budget}) while waiting for {self.target.what}; last error: "
            f"{sub.last_error}. The {self.target.kind} may still be running: a retry adopts it if so."
        )
        self.log.error("%s", message)
        return WorkloadEvent.error(
            self.target, message, uid=self.logs.seen_uid, log_cursor=self.logs.cursor()
        )

    async def evaluate(self) -> WorkloadEvent | None:
        """Gather one look, have it reported (:func:`~airflow_k8s_ml.status.wait_report.report`), log and
        gather what the report says: an event when the wait is over, else None."""
        unreachable = self._unreachable()
        if unreachable is not None:
            return unreachable
        if self.workload.error is not None:
            message = (
                f"cannot watch {self.spec.resource.plural} in {self.target.namespace}: {self.workload.error}"
            )
            return WorkloadEvent.error(
                self.target, message, uid=self.logs.seen_uid, log_cursor=self.logs.cursor()
            )
        if not self.workload.synced:
            return None
        look = await self._look(await self._workload())
        self._recall(look)
        now = time.time()
        ask = position_ask(self.target, look, self.said, now=now, every=self.timings.position_refresh)
        if ask is not None:
            self.said = self.said.answered(ask, await self._pending(ask))
        if events_ask(look, self.said, now=now, every=self.pace.events_every):
            look = replace(look, events=await self._pod_warnings(look.pods or ()))
        told = report(self.target, look, self.said, now=now, deadlines=self.spec.deadlines, pace=self.pace)
        if len(told.said.disrupted) > len(self.said.disrupted) and self.spec.try_number is not None:
            await self._persist_disruptions(told.said)
        self.said, self.next_look_at = told.said, told.next_look_at
        for line in told.lines:
            getattr(self.log, line.level)("%s", line.text)
            if line.tail is not None:
                for text in await self._tail(*line.tail):
                    self.log.info("  %s", text)
        if not told.decision.done:
            return None
        if told.drain_logs:
            if self.logs.relay is not None:
                await self._catch_up_pods()
                await self.logs.relay.drain(self.timings.log_drain)
            if self.logs.writer is not None:  # before the event: a crash after it replays nothing
                await self.logs.writer.flush()
        reports, warnings = await self._diagnose(told.diagnose) if told.diagnose else ([], [])
        return final_event(told, self.target, reports, warnings, self.logs.cursor())

    def _recall(self, look: Look) -> None:
        """Once, at the first look at our workload: count on from the disruptions an earlier wait of this try
        persisted on it (:mod:`.disruption_ledger`; a triggerer restart does not reset the count)."""
        obj = look.obj
        if self.recalled or obj is None or (self.target.uid and uid_of(obj) != self.target.uid):
            return
        self.recalled = True
        known = read_disruptions(obj, self.spec.try_number)
        if known:
            self.said = replace(self.said, disrupted=known)
            self.log.info(
                "%s: %s in this attempt before this wait (persisted on it); counting on from there",
                self.target.what,
                count_text(known),
            )

    async def _persist_disruptions(self, said: Said) -> None:
        """The attempt's disruptions onto the workload, before their line is logged."""
        spec = self.spec
        assert spec.try_number is not None
        await persist_disruptions(
            self.kube,
            spec.resource,
            self.target.namespace,
            self.target.name,
            spec.try_number,
            said.disrupted,
            self.log,
        )

    async def _look(self, obj: Mapping[str, Any] | None) -> Look:
        """The workload, its pods (None while their watch lists) and Kueue Workloads, or its tombstone."""
        if obj is None:
            return Look(None, tombstone=self.workload.tombstones.get(self.target.name))
        if self.target.uid and uid_of(obj) != self.target.uid:
            return Look(obj)  # replaced: decided without pods (not ours)
        self.logs.seen_uid = uid_of(obj)
        workloads = await self._workloads(obj)
        pods = await self._pods(obj)
        if pods is not None and self.logs.relay is not None:
            self.logs.relay.update(pods)
        gone = list(self.pods_sub.tombstones.values()) if self.pods_sub is not None else []
        return Look(obj, pods, workloads=workloads, gone_pods=gone)

    async def _catch_up_pods(self) -> None:
        """Before the drain, show the relay the pods as the API server has them now. The workload's watch
        can report its end before the pod watch delivers a short-lived replica's start (a TFJob worker that
        reported and exited within a second of the Chief): without this read, that replica's stream never
        opens and its lines are never relayed. One LIST per finished wait; a failure keeps the watch's
        view."""
        relay, uid = self.logs.relay, self.logs.seen_uid
        if relay is None or not uid or self.pods_sub is None or not self.pods_sub.synced:
            return
        watched = {uid_of(pod): pod for pod in self.pods_sub.objects().values() if owned_by(pod, uid)}
        try:
            listed = await self.kube.pods_of(self.target.kind, self.target.name, self.target.namespace)
        except Exception as exc:  # best effort: the wait's outcome never depends on logs
            self.log.debug("could not list the pods of %s before the log drain: %s", self.target.what, exc)
            return
        current = {**watched, **{uid_of(pod): pod for pod in listed if owned_by(pod, uid)}}
        relay.update(list(current.values()))
        relay.never_read(
            pod
            for pod in self.pods_sub.tombstones.values()
            if owned_by(pod, uid) and uid_of(pod) not in current
        )

    async def _workloads(self, obj: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
        """A queued job's Kueue Workloads, from a watch of ``workloads.kueue.x-k8s.io`` in the namespace
        selected by upstream's ``kueue.x-k8s.io/job-uid`` label. No Kueue installed (the LIST answers 404)
        or no right to list: None, silently - the wait goes on as without a queue."""
        uid = queued_job_uid(obj)
        if uid is None:
            return None
        if self.queue_sub is None:
            # Kueue's Workload at the version this connection's cluster serves (asked once per connection).
            workloads = resource_for(await self.kube.kueue_api_version(), "Workload")
            key = WatchKey(self.spec.kubernetes_conn_id, workloads, self.target.namespace, JOB_UID_LABEL)
            self.queue_sub = await self.stack.enter_async_context(
                get_registry().subscribe(key, uid, self.wake, kube=self.kube)
            )
        if self.queue_sub.error is not None or not self.queue_sub.synced:
            return None
        return list(self.queue_sub.objects().values())

    async def _pending(self, ask: PositionAsked) -> dict[str, Any] | None:
        """The LocalQueue's pending workloads from Kueue's visibility API. No visibility API (404), no RBAC
        (403), any failure: no position, silently - the wait goes on as without it."""
        try:
            async with asyncio.timeout(POSITION_TIMEOUT):
                return await self.kube.pending_workloads(ask.queue, self.target.namespace)
        except Exception as exc:  # an optional nicety: any failure means "no position"
            self.log.debug("no queue position for %s: %s", self.target.what, exc)
            return None

    async def _pod_warnings(self, pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The pods' Warning events the report asked for; a failure reads as none (asked again later)."""
        try:
            return await self.kube.pod_warnings(pods, self.target.namespace)
        except Exception as exc:  # an optional nicety: the wait goes on without the events
            self.log.debug("no Warning events for the pods of %s: %s", self.target.what, exc)
            return []

    async def _tail(self, pod: str, container: str) -> list[str]:
        """A crash-looping container's last lines (its last instance's: the one that failed)."""
        try:
            text = await self.kube.log_tail(pod, self.target.namespace, container, STUCK_TAIL_LINES)
            if not text.strip():
                text = await self.kube.log_tail(
                    pod, self.target.namespace, container, STUCK_TAIL_LINES, previous=True
                )
        except Exception as exc:
            return [f"(no logs: {exc})"]
        return text.splitlines()[-STUCK_TAIL_LINES:]

    async def _workload(self) -> dict[str, Any] | None:
        """The latest object. Absent from the synced cache without having been seen deleted means the watch
        may lag a just-created object: a GET decides (again at most every ``trigger_refetch_seconds``)."""
        name = self.target.name
        obj = self.workload.get(name)
        if obj is not None or name in self.workload.tombstones:
            return obj
        now = time.monotonic()
        if self.fetched_at is None or now - self.fetched_at >= self.timings.refetch:
            self.fetched_at = now
            res = self.spec.resource
            self.fetched = await self.kube.get(res.api_version, res.kind, name, self.target.namespace)
        return self.fetched

    async def _pods(self, obj: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The workload's current pods from the shared pod watch; None until that watch has listed."""
        label = pod_label_key(self.target.kind, obj)
        if label is None:
            return []
        if self.pods_sub is None:
            key = WatchKey(
                self.spec.kubernetes_conn_id, resource_for("v1", "Pod"), self.target.namespace, label
            )
            self.pods_sub = await self.stack.enter_async_context(
                get_registry().subscribe(key, self.target.name, self.wake, kube=self.kube)
            )
            if self.spec.stream_logs:
                self._start_relay(obj)
        if self.pods_sub.error is not None:
            if not self.warned_pods:  # e.g. no RBAC to list pods: wait on the workload alone
                self.warned_pods = True
                self.log.warning("cannot watch pods of %s: %s", self.target.what, self.pods_sub.error)
            return []
        if not self.pods_sub.synced:
            return None
        uid = uid_of(obj)
        return [pod for pod in self.pods_sub.objects().values() if owned_by(pod, uid)]

    def _start_relay(self, obj: Mapping[str, Any]) -> None:
        """The log relay, resuming after the last line the try's task log holds (:mod:`.log_ledger`), or,
        where that log cannot be read here, after the cursor a previous trigger of this try persisted on the
        workload (read from the watch cache: no request); the kwargs' cursor when it is further."""
        spec = self.spec
        logged = logged_cursor(spec.task_instance) if spec.try_number is not None else None
        if logged is not None:
            start = logged
            if logged:
                self.log.info("resuming the log relay after the last line in the task log of this try")
        else:
            start = read_cursor(obj, spec.try_number)
            if start:
                self.log.info(
                    "resuming the log relay after the last line relayed for try %s", spec.try_number
                )
        relay = LogRelay(
            self.kube,
            self.target.namespace,
            self.log,
            cursor=merge_cursors(spec.log_cursor, start),
            max_line=self.timings.max_line,
            lines_per_second=self.timings.lines_per_second,
        )
        self.logs.relay = relay
        if spec.try_number is not None:
            writer = CursorWriter(
                self.kube,
                spec.resource,
                self.target.namespace,
                self.target.name,
                spec.try_number,
                lambda: relay.cursor,
                self.log,
            )
            relay.on_relayed = writer.mark
            self.logs.writer = writer

    async def _diagnose(self, diagnose: Diagnose) -> tuple[list[dict[str, Any]], list[str]]:
        """The pods the report chose, with their last lines, and the Warning events. Never raises."""
        reports = []
        for pod in pods_to_read(diagnose):
            lines, relayed = await self._last_lines(pod, diagnose.lines)
            report = pod_report(pod, lines)
            if relayed:
                report["relayed"] = True  # already in the task log: the operator does not print them again
            reports.append(report)
        warnings: list[str] = []
        try:
            warnings = await self.kube.warning_events(diagnose.obj, diagnose.pods, limit=diagnose.warnings)
        except Exception as exc:
            self.log.warning("could not read Warning events of %s: %s", self.target.what, exc)
        return reports, warnings

    async def _last_lines(self, pod: Mapping[str, Any], count: int) -> tuple[list[str], bool]:
        """The pod's last lines, and whether they were relayed into the task log (from the relay's tail)."""
        relay = self.logs.relay
        if relay is not None:
            lines = [line for _, key in stream_keys(pod) for line in relay.last_lines(key)]
            if lines:
                return lines[-count:] if count else [], True
        source = log_source(pod)
        if source is None:
            return [], False
        try:
            text = await self.kube.log_tail(source[0], self.target.namespace, source[1], count)
        except Exception as exc:
            return [f"(no logs: {exc})"], False
        return text.splitlines()[-count:] if count else [], False


#: Set last: a module another thread is still importing is not used from the loop (its import lock).
READY = True
