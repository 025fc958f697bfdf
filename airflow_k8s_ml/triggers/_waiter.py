"""The wait of a :class:`~airflow_k8s_ml.triggers.workload.WorkloadTrigger`: subscriptions, phase clock,
log relay, the unreachable-API budget, and the one event that ends it.

An I/O shell around :func:`airflow_k8s_ml.status.decide`: it gathers observations from the shared watches
(the workload, its tombstone if the watch saw it deleted, its pods) and acts on the decision (drain the
relay, read the failed pods' last lines, report). The trigger hands in what the wait needs - a
:class:`WaitSpec`, the :class:`LogState` it shares with the trigger's exits, and its logger - so nothing
here reads the trigger's state.

Why a module of its own: everything here (status classifiers, diagnostics, watches, the async client) is
imported by the trigger's first ``run`` in a worker thread, so the triggerer imports
:mod:`~airflow_k8s_ml.triggers.workload` - on its event loop - cheaply. See that module for how it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow_k8s_ml.deadlines import Deadlines, format_limit
from airflow_k8s_ml.kube.async_client import get_kube, load_clients
from airflow_k8s_ml.kube.resources import pod_label_key, resource_for
from airflow_k8s_ml.kube.watch import Subscription, WatchKey, get_registry
from airflow_k8s_ml.status.clock import PhaseClock
from airflow_k8s_ml.status.kueue import (
    JOB_UID_LABEL,
    KUEUE_API_VERSION,
    POSITION_REFRESH,
    PositionAsked,
    QueueState,
    follow,
    next_position_ask,
    queued_job_uid,
    workload_for,
)
from airflow_k8s_ml.status.pod import owned_by
from airflow_k8s_ml.status.rollout_progress import RolloutProgress, progress_line
from airflow_k8s_ml.status.wait import Decision, Observation, Target, decide, uid_of
from airflow_k8s_ml.triggers.diagnostics import MAX_PODS, failed_pods, failure_message, pod_report
from airflow_k8s_ml.triggers.events import WorkloadEvent
from airflow_k8s_ml.triggers.log_cursor import CursorWriter, merge_cursors, read_cursor
from airflow_k8s_ml.triggers.logs import MAX_LINE, LogRelay, stream_keys

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.async_client import AsyncKube
    from airflow_k8s_ml.kube.resources import Resource

__all__ = ["API_UNREACHABLE_TIMEOUT", "LogState", "WaitSpec", "api_unreachable_timeout", "wait"]

#: Kueue's Workload (``kueue.x-k8s.io/v1beta1``), watched for queued jobs.
KUEUE_WORKLOAD = resource_for(KUEUE_API_VERSION, "Workload")
#: Re-evaluate at least this often even without changes (belt and braces; a watch delivers changes).
HEARTBEAT = 60.0
#: How long the log streams may take to deliver their last lines before the event (an upper bound: the
#: wait ends as soon as they have; 1 s lost whole logs of short runs on a loaded machine).
LOG_DRAIN = 10.0
#: How often to re-GET a workload the watch does not show (yet).
REFETCH = 5.0
#: The longest a wait waits for Kueue's visibility API to answer (its GET is retried like any other).
POSITION_TIMEOUT = 5.0
#: ``[airflow_k8s_ml] api_unreachable_timeout`` when the option is not set: 15 minutes.
API_UNREACHABLE_TIMEOUT = 900.0


def _option(name: str, fallback: float) -> float:
    """A positive ``[airflow_k8s_ml]`` option (:mod:`airflow_k8s_ml.config`); ``fallback`` for a bad value."""
    from airflow_k8s_ml.config import get_float

    try:
        value = get_float(name)
    except (ValueError, TypeError):
        return fallback
    return value if value > 0 else fallback


def api_unreachable_timeout() -> float:
    """Seconds an API server may stay unreachable before a wait fails: ``[airflow_k8s_ml]
    api_unreachable_timeout``, else 15 minutes (also for a bad value)."""
    return _option("api_unreachable_timeout", API_UNREACHABLE_TIMEOUT)


class Timings(NamedTuple):
    """The wait's timings from the provider's config, read once per wait (in-memory lookups)."""

    heartbeat: float = HEARTBEAT
    refetch: float = REFETCH
    log_drain: float = LOG_DRAIN
    max_line: int = MAX_LINE
    position_refresh: float = POSITION_REFRESH

    @classmethod
    def configured(cls) -> Timings:
        return cls(
            position_refresh=_option("kueue_position_seconds", POSITION_REFRESH),
            heartbeat=_option("trigger_heartbeat_seconds", HEARTBEAT),
            refetch=_option("trigger_refetch_seconds", REFETCH),
            log_drain=_option("log_relay_drain_seconds", LOG_DRAIN),
            max_line=int(_option("log_relay_max_line", MAX_LINE)),
        )


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
        waiter = Waiter(
            spec, logs, log, kube, workload, wake, stack, api_unreachable_timeout(), Timings.configured()
        )
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


DEFAULT_TIMINGS = Timings()


class Waiter:
    """The state of one wait: the subscriptions, the phase clock, the log relay; reports the decision."""

    def __init__(
        self,
        spec: WaitSpec,
        logs: LogState,
        log: Any,
        kube: AsyncKube,
        workload: Subscription,
        wake: asyncio.Event,
        stack: contextlib.AsyncExitStack,
        unreachable_timeout: float = API_UNREACHABLE_TIMEOUT,
        timings: Timings = DEFAULT_TIMINGS,
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
        self.queue: QueueState | None = None  # its last state read (logged once per change)
        self.position_asked: PositionAsked | None = None  # the visibility API's last ask ...
        self.pending: dict[str, Any] | None = None  # ... and its answer (None: no position known)
        self.clock = PhaseClock()
        self.next_look_at: float | None = None
        self.fetched: dict[str, Any] | None = None
        self.fetched_at: float | None = None
        self.warned_pods = False
        self.rollout: RolloutProgress | None = None  # the counts last logged (Deployment waits only)
        self.unreachable_timeout = unreachable_timeout
        self.timings = timings

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
        return max(self.unreachable_timeout - down[0], 0.0) + 0.001

    def _sleep_for(self, now: float) -> float:
        pods_listing = self.pods_sub is not None and not self.pods_sub.synced and self.pods_sub.error is None
        if not self.workload.synced or pods_listing:
            return 1.0
        heartbeat = self.timings.heartbeat
        expires = self.next_look_at
        sleep = heartbeat if expires is None else min(max(expires - now, 0.0) + 0.001, heartbeat)
        asked, queue = self.position_asked, self.queue
        if asked is not None and queue is not None and not queue.admitted and not queue.finished:
            sleep = min(sleep, max(asked.at + self.timings.position_refresh - now, 0.0) + 0.001)
        return sleep

    def _unreachable(self) -> WorkloadEvent | None:
        """The error event once the API server has been unreachable for the whole budget."""
        down = self._unreachable_for()
        if down is None or down[0] < self.unreachable_timeout:
            return None
        from datetime import timedelta

        elapsed, sub = down
        budget = format_limit(timedelta(seconds=self.unreachable_timeout))
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
        """Gather one observation, decide, act: an event when the wait is over, else None."""
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
        obj = await self._workload()
        observed = await self._observe(obj)
        decision = decide(
            self.target, observed, now=time.time(), deadlines=self.spec.deadlines, clock=self.clock
        )
        self.clock, self.next_look_at = decision.clock, decision.next_look_at
        if not decision.done:
            return None
        event = await self._report(decision, obj, list(observed.pods or ()))
        admitted_at = self.queue.admitted_at if self.queue is not None else None
        return replace(event, admitted_at=admitted_at) if admitted_at else event

    async def _observe(self, obj: Mapping[str, Any] | None) -> Observation:
        """The workload, its pods (None while their watch lists), or its tombstone if it is gone."""
        if obj is None:
            return Observation(None, tombstone=self.workload.tombstones.get(self.target.name))
        if self.target.uid and uid_of(obj) != self.target.uid:
            return Observation(obj)  # replaced: decided without pods (not ours)
        self.logs.seen_uid = uid_of(obj)
        if self.target.kind == "Deployment":  # rollout progress: one line per change of the replica counts
            self.rollout, line = progress_line(obj, self.rollout)
            if line is not None:
                self.log.info("%s", line)
        queue = await self._queue(obj)
        pods = await self._pods(obj)
        if pods is not None and self.logs.relay is not None:
            self.logs.relay.update(pods)
        return Observation(obj, pods, queue=queue)

    async def _queue(self, obj: Mapping[str, Any]) -> QueueState | None:
        """A queued job's Kueue Workload, from a watch of ``workloads.kueue.x-k8s.io`` in the namespace
        selected by upstream's ``kueue.x-k8s.io/job-uid`` label; each change of its state is logged once.
        No Kueue installed (the LIST answers 404) or no right to list: None, silently - the wait goes on
        as without a queue."""
        uid = queued_job_uid(obj)
        if uid is None:
            return None
        if self.queue_sub is None:
            key = WatchKey(self.spec.kubernetes_conn_id, KUEUE_WORKLOAD, self.target.namespace, JOB_UID_LABEL)
            self.queue_sub = await self.stack.enter_async_context(
                get_registry().subscribe(key, uid, self.wake, kube=self.kube)
            )
        if self.queue_sub.error is not None or not self.queue_sub.synced:
            return self.queue
        workloads = list(self.queue_sub.objects().values())
        await self._ask_position(workload_for(workloads, uid))
        self.queue, line = follow(self.queue, workloads, uid, self.target.what, self.pending)
        if line is not None:
            self.log.info("%s", line)
        return self.queue

    async def _ask_position(self, found: Mapping[str, Any] | None) -> None:
        """Kueue's visibility API for the LocalQueue's pending workloads, when :func:`next_position_ask` says
        so (one GET per change of the Workload, else every ``kueue_position_seconds``, never once it is
        admitted). No visibility API (404), no RBAC (403), any failure: no position, silently - the wait
        goes on as without it."""
        ask = next_position_ask(found, self.position_asked, time.time(), self.timings.position_refresh)
        if ask is None:
            return
        self.position_asked = ask
        try:
            async with asyncio.timeout(POSITION_TIMEOUT):
                self.pending = await self.kube.pending_workloads(ask.queue, self.target.namespace)
        except Exception as exc:  # an optional nicety: any failure means "no position"
            self.log.debug("no queue position for %s: %s", self.target.what, exc)
            self.pending = None

    async def _workload(self) -> dict[str, Any] | None:
        """The latest object. Absent from the synced cache without having been seen deleted means the watch
        may lag a just-created object: a GET decides (again at most every :data:`REFETCH` seconds)."""
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
        """The log relay, resuming after the furthest of the kwargs' cursor and the one a previous trigger
        of this try persisted on the workload (read from the watch cache: no request)."""
        spec = self.spec
        persisted = read_cursor(obj, spec.try_number)
        if persisted:
            self.log.info("resuming the log relay after the last line relayed for try %s", spec.try_number)
        relay = LogRelay(
            self.kube,
            self.target.namespace,
            self.log,
            cursor=merge_cursors(spec.log_cursor, persisted),
            max_line=self.timings.max_line,
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

    async def _report(
        self, decision: Decision, obj: Mapping[str, Any] | None, pods: list[Mapping[str, Any]]
    ) -> WorkloadEvent:
        """Act on a final decision: drain the relay, read the failed (on a deadline: every) pod, report."""
        if decision.verdict in ("succeeded", "failed"):
            if self.logs.relay is not None:
                await self.logs.relay.drain(self.timings.log_drain)
            if self.logs.writer is not None:  # before the event: a crash after it replays nothing
                await self.logs.writer.flush()
        if decision.verdict == "deadline":
            self.log.warning("%s: %s", self.target.what, decision.message)
        if obj is None or decision.vanished or decision.verdict not in ("failed", "deadline"):
            return WorkloadEvent.decided(decision, self.target, log_cursor=self.logs.cursor())
        reports, warnings = await self._diagnose(obj, pods)
        message = decision.message
        if decision.verdict == "failed":
            t = self.target
            message = failure_message(t.kind, t.namespace, t.name, decision.state, reports)
        return WorkloadEvent.decided(
            decision,
            self.target,
            message=message,
            pods=reports,
            warnings=warnings,
            log_cursor=self.logs.cursor(),
        )

    async def _diagnose(
        self, obj: Mapping[str, Any], pods: list[Mapping[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Failed pods (incl. deleted ones) with their last lines, and Warning events. Never raises."""
        gone = list(self.pods_sub.tombstones.values()) if self.pods_sub is not None else []
        seen = {uid_of(p) for p in pods}
        candidates = pods + [p for p in gone if uid_of(p) not in seen and owned_by(p, uid_of(obj))]
        reports = []
        for pod in failed_pods(candidates)[:MAX_PODS]:
            lines, relayed = await self._last_lines(pod)
            report = pod_report(pod, lines)
            if relayed:
                report["relayed"] = True  # already in the task log: the operator does not print them again
            reports.append(report)
        warnings: list[str] = []
        try:
            warnings = await self.kube.warning_events(obj, candidates, limit=10)
        except Exception as exc:
            self.log.warning("could not read Warning events of %s: %s", self.target.what, exc)
        return reports, warnings

    async def _last_lines(self, pod: Mapping[str, Any]) -> tuple[list[str], bool]:
        """The pod's last lines, and whether they were relayed into the task log (from the relay's tail)."""
        relay = self.logs.relay
        keys = stream_keys(pod)
        if relay is not None:
            lines = [line for _, key in keys for line in relay.last_lines(key)]
            if lines:
                return lines[-20:], True
        if not keys or not (pod.get("status") or {}).get("containerStatuses"):
            return [], False
        name = str((pod.get("metadata") or {}).get("name"))
        try:
            text = await self.kube.log_tail(name, self.target.namespace, keys[0][0], 20)
        except Exception as exc:
            return [f"(no logs: {exc})"], False
        return text.splitlines()[-20:], False


#: Set last: a module another thread is still importing is not used from the loop (its import lock).
READY = True
