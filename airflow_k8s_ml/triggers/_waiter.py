"""The wait of a :class:`~airflow_k8s_ml.triggers.workload.WorkloadTrigger`: subscriptions, phase clock,
log relay, the unreachable-API budget, and the one event that ends it.

Why a module of its own: everything here (status classifiers, diagnostics, watches, the async client) is
imported by the trigger's first ``run`` in a worker thread, so the triggerer imports
:mod:`~airflow_k8s_ml.triggers.workload` - on its event loop - cheaply. See that module for how it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow_k8s_ml.kube.async_client import get_kube, load_clients
from airflow_k8s_ml.kube.resources import pod_label_key, resource_for
from airflow_k8s_ml.kube.watch import Subscription, WatchKey, get_registry
from airflow_k8s_ml.status import WorkloadState, classify, deadline_phase
from airflow_k8s_ml.status.pod import owned_by
from airflow_k8s_ml.status.rollout_progress import RolloutProgress, progress_line
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
from airflow_k8s_ml.triggers.log_cursor import CursorWriter, merge_cursors, read_cursor
from airflow_k8s_ml.triggers.logs import MAX_LINE, LogRelay, stream_keys

if TYPE_CHECKING:
    from airflow_k8s_ml.kube.async_client import AsyncKube
    from airflow_k8s_ml.triggers.workload import WorkloadTrigger

__all__ = ["API_UNREACHABLE_TIMEOUT", "api_unreachable_timeout", "wait"]

#: Re-evaluate at least this often even without changes (belt and braces; a watch delivers changes).
HEARTBEAT = 60.0
#: How long finished containers' log streams may take to deliver their last lines before the event.
LOG_DRAIN = 1.0
#: How often to re-GET a workload the watch does not show (yet).
REFETCH = 5.0
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

    @classmethod
    def configured(cls) -> Timings:
        return cls(
            heartbeat=_option("trigger_heartbeat_seconds", HEARTBEAT),
            refetch=_option("trigger_refetch_seconds", REFETCH),
            log_drain=_option("log_relay_drain_seconds", LOG_DRAIN),
            max_line=int(_option("log_relay_max_line", MAX_LINE)),
        )


def _uid(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


async def wait(t: WorkloadTrigger) -> WorkloadEvent:
    """Wait for ``t``'s workload until one event decides it."""
    await load_clients()
    kube = await get_kube(t.kubernetes_conn_id)
    registry = get_registry()
    wake = asyncio.Event()
    key = WatchKey(t.kubernetes_conn_id, t.resource, t.namespace)
    async with contextlib.AsyncExitStack() as stack:
        workload = await stack.enter_async_context(
            registry.subscribe(key, t.name, wake, kube=kube, poll_interval=t.poll_interval)
        )
        stack.push_async_callback(t._close_relay)
        waiter = Waiter(t, kube, workload, wake, stack, api_unreachable_timeout(), Timings.configured())
        while True:
            wake.clear()
            event = await waiter.evaluate()
            if event is not None:
                return event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), waiter.sleep_for(time.time()))


DEFAULT_TIMINGS = Timings()


class Waiter:
    """The state of one wait: the subscriptions, the phase clock, the log relay; decides the outcome."""

    def __init__(
        self,
        trigger: WorkloadTrigger,
        kube: AsyncKube,
        workload: Subscription,
        wake: asyncio.Event,
        stack: contextlib.AsyncExitStack,
        unreachable_timeout: float = API_UNREACHABLE_TIMEOUT,
        timings: Timings = DEFAULT_TIMINGS,
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
        self.rollout: RolloutProgress | None = None  # the counts last logged (Deployment waits only)
        self.unreachable_timeout = unreachable_timeout
        self.timings = timings

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
        if down is None:
            return self.timings.heartbeat
        return max(self.unreachable_timeout - down[0], 0.0) + 0.001

    def _sleep_for(self, now: float) -> float:
        pods_listing = self.pods_sub is not None and not self.pods_sub.synced and self.pods_sub.error is None
        if not self.workload.synced or pods_listing:
            return 1.0
        if self.clock.phase is None or self.deadlines.is_empty():
            return self.timings.heartbeat
        expires = next_expiry_at(
            self.deadlines,
            task_started_at=self.t.task_started_at,
            phase=self.clock.phase,
            phase_since=self.clock.since,
            running_since=self.clock.running_since,
        )
        heartbeat = self.timings.heartbeat
        return heartbeat if expires is None else min(max(expires - now, 0.0) + 0.001, heartbeat)

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
        if self.t.kind == "Deployment":  # rollout progress: one line per change of the replica counts
            self.rollout, line = progress_line(obj, self.rollout)
            if line is not None:
                self.t.log.info("%s", line)
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
        if self.fetched_at is None or now - self.fetched_at >= self.timings.refetch:
            self.fetched_at = now
            self.fetched = await self.kube.get(self.t.api_version, self.t.kind, self.t.name, self.t.namespace)
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
        return [pod for pod in self.pods_sub.objects().values() if owned_by(pod, uid)]

    def _new_relay(self, obj: Mapping[str, Any]) -> LogRelay:
        """The log relay, resuming after the furthest of the kwargs' cursor and the one a previous trigger
        of this try persisted on the workload (read from the watch cache: no request)."""
        t = self.t
        persisted = read_cursor(obj, t.try_number)
        if persisted:
            t.log.info("resuming the log relay after the last line relayed for try %s", t.try_number)
        relay = LogRelay(
            self.kube, t.namespace, t.log, cursor=merge_cursors(t.log_cursor, persisted),
            max_line=self.timings.max_line,
        )
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
            await relay.drain(self.timings.log_drain)
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
        candidates = pods + [p for p in gone if _uid(p) not in seen and owned_by(p, _uid(obj))]
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
            self.t.log.warning("could not read Warning events of %s: %s", self.t._what(), exc)
        return reports, warnings

    async def _last_lines(self, pod: Mapping[str, Any]) -> tuple[list[str], bool]:
        """The pod's last lines, and whether they were relayed into the task log (from the relay's tail)."""
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
            text = await self.kube.log_tail(name, self.t.namespace, keys[0][0], 20)
        except Exception as exc:
            return [f"(no logs: {exc})"], False
        return text.splitlines()[-20:], False


#: Set last: a module another thread is still importing is not used from the loop (its import lock).
READY = True
