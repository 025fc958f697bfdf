"""Live log relay: every replica's container logs into the trigger's log (the task log while deferred).

Lines are prefixed by replica (``[master-0]``, ``[worker-1]``; the pod name for Jobs). Each stream is a
``follow`` read with ``timestamps``; the per-replica cursor (last timestamp relayed and how many lines
carried exactly that timestamp) survives reconnects: a resumed read asks for ``sinceTime`` (seconds
precision, which every API server accepts) and :class:`LineFilter` drops what was already relayed, so a cut
connection or a container restart never duplicates a line. The cursor travels in the trigger's final event
and is persisted on the workload after every relayed batch (``on_relayed``, :mod:`.log_cursor`), so a
trigger restarted after a triggerer crash resumes after it.

A backlog (a resumed stream, a chatty trainer) arrives faster than it is relayed: the relay yields to the
event loop every :data:`YIELD_EVERY` seconds of work, so one stream never stalls the triggerer's loop.

A flood is paced: at most ``lines_per_second`` lines a second are written (a burst of ten seconds' worth at
once), because each written line goes to the triggerer's supervisor over an unbuffered socket on the event
loop, and a full socket blocks every trigger. Lines over the pace are counted, not written, the cursor moves
past them (a resumed stream does not bring them back), and one line a second per pod says how many were left
out and how to read the whole log.

No line is lost in silence. A stream is read in chunks, not lines (:mod:`.log_lines`): a line longer than
``max_line`` characters is cut with a marker saying how many bytes were cut, and a line of any length (10 MB
without a newline) neither ends the stream nor is held in memory. When the workload ends and the drain budget
runs out while a stream still has lines (a flood, a replica that outlives the workload), the relay stops
relaying, counts what is left for up to :data:`COUNT_SECONDS`, and says in the task log how many lines of
which pod were not relayed and how to read the whole log. A stream the relay gives up on, or never opens
(more than ``max_streams``), is named too.

The pure parts (timestamp parsing, :class:`LineFilter`, :func:`advance`) are unit-tested; :class:`LogRelay`
is the I/O shell, fed pod updates by the trigger's shared pod watch (it never lists pods itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.kube.errors import ApiError
from airflow_k8s_ml.kube.requests import log_request
from airflow_k8s_ml.kube.resources import replica_name
from airflow_k8s_ml.triggers.log_lines import LineBudget, LineSplitter, cut_line

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["STAMP_FIELD", "LineFilter", "LogRelay", "advance", "split_timestamp", "stamped", "timestamp_key"]

Cursor = dict[str, Any]  # {"ts": "2024-05-01T12:00:00.123456789Z", "n": 2}
MAX_LINE = 500
#: Relay at most this long (seconds) before giving the event loop a turn.
YIELD_EVERY = 0.005
#: ``[airflow_k8s_ml] log_relay_lines_per_second`` when not configured; the burst is this many seconds' worth.
LINES_PER_SECOND = 200.0
BURST_SECONDS = 10.0
#: Lines left out over the pace are said at most this often per pod (seconds).
SAY_SKIPPED_EVERY = 1.0


#: The structured field each relayed line carries (read back by :mod:`.log_ledger`).
STAMP_FIELD = "pod_log_ts"


@contextlib.contextmanager
def stamped(stamp: str) -> Iterator[None]:
    """Log calls inside carry ``STAMP_FIELD=stamp``, through structlog's context variables, which Airflow's
    triggerer merges into every event it writes to the trigger log file (nothing without a stamp)."""
    if not stamp:
        yield
        return
    from structlog.contextvars import bound_contextvars  # Airflow's logging; loaded by the triggerer

    with bound_contextvars(**{STAMP_FIELD: stamp}):
        yield


def split_timestamp(line: str) -> tuple[str, str]:
    """``"<RFC3339Nano> text"`` -> (timestamp, text); ("", line) when the line has no timestamp."""
    stamp, sep, text = line.partition(" ")
    if sep and timestamp_key(stamp) is not None:
        return stamp, text
    return "", line


def timestamp_key(stamp: str) -> tuple[int, int] | None:
    """(epoch seconds, nanoseconds): exact ordering of RFC3339Nano stamps (datetime stops at micros)."""
    try:
        main, offset = stamp, ""
        if stamp.endswith("Z"):
            main, offset = stamp[:-1], "+00:00"
        elif len(stamp) > 6 and stamp[-6] in "+-" and stamp[-3] == ":":
            main, offset = stamp[:-6], stamp[-6:]
        whole, _, fraction = main.partition(".")
        if not fraction.isdigit() and fraction:
            return None
        seconds = datetime.fromisoformat(whole + (offset or "+00:00")).timestamp()
        return int(seconds), int((fraction or "0")[:9].ljust(9, "0"))
    except ValueError:
        return None


#: ``close`` cancels the streams up to this many times, waiting this long each time.
CLOSE_ROUNDS = 10
CLOSE_ROUND_SECONDS = 0.5
#: After the drain budget, streams still open are read this long more, counting (not relaying) their lines.
COUNT_SECONDS = 2.0
#: Bytes of the stamp and separator before a line's text (``2024-05-01T12:00:00.123456789Z ``, with room).
_STAMP_BYTES = 64


class LineFilter:
    """Drops lines already relayed before a reconnect: older than the cursor, or the first ``n`` lines
    carrying exactly the cursor's timestamp."""

    def __init__(self, cursor: Cursor | None) -> None:
        self._key = timestamp_key(str(cursor["ts"])) if cursor else None
        self._repeats = int(cursor.get("n", 1)) if cursor else 0
        self._equal_seen = 0

    def accept(self, stamp: str) -> bool:
        key = timestamp_key(stamp) if stamp else None
        if self._key is None or key is None:
            return True
        if key < self._key:
            return False
        if key == self._key:
            self._equal_seen += 1
            return self._equal_seen > self._repeats
        return True


def advance(cursor: Cursor | None, stamp: str) -> Cursor | None:
    """The cursor after relaying a line stamped ``stamp``."""
    if not stamp:
        return cursor
    if cursor and cursor.get("ts") == stamp:
        return {"ts": stamp, "n": int(cursor.get("n", 1)) + 1}
    return {"ts": stamp, "n": 1}


def since_time(cursor: Cursor | None) -> str | None:
    """``sinceTime`` for a resumed read: the cursor's second (the filter drops the overlap)."""
    if not cursor:
        return None
    stamp = str(cursor["ts"])
    return stamp[:19] + "Z" if len(stamp) >= 19 else None


def _container_state(pod: Mapping[str, Any], container: str) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return status.get("state") or {}
    return {}


def _started(pod: Mapping[str, Any], container: str) -> bool:
    state = _container_state(pod, container)
    return "running" in state or "terminated" in state


def _finished(pod: Mapping[str, Any], container: str) -> bool:
    """The container's last instance has exited and no other will start."""
    phase = (pod.get("status") or {}).get("phase")
    policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
    terminated = "terminated" in _container_state(pod, container)
    return terminated and (phase in ("Succeeded", "Failed") or policy == "Never")


def stream_keys(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(container, replica key) per container: ``master-0`` or ``master-0/sidecar`` for multi-container."""
    containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    replica = replica_name(pod)
    if len(containers) == 1:
        return [(containers[0], replica)]
    return [(name, f"{replica}/{name}") for name in containers]


class LogRelay:
    """Follow the logs of every started container of the pods it is shown; stop when they finish."""

    def __init__(
        self,
        kube: Any,
        namespace: str,
        log: logging.Logger | Any,
        *,
        cursor: Mapping[str, Cursor] | None = None,
        keep_lines: int = 20,
        reconnect_delay: float = 0.5,
        max_streams: int = 64,
        max_line: int = MAX_LINE,
        lines_per_second: float = LINES_PER_SECOND,
    ) -> None:
        self.kube = kube
        self.lines_per_second = lines_per_second
        self._budget = LineBudget(lines_per_second, lines_per_second * BURST_SECONDS, time.monotonic())
        self.over_pace: dict[str, int] = {}  # replica key -> lines left out over the pace, not yet said
        self._said_at: dict[str, float] = {}  # replica key -> when its left-out lines were last said
        self.max_line = max_line
        self.namespace = namespace
        self.log = log
        self.cursor: dict[str, Cursor] = {k: dict(v) for k, v in (cursor or {}).items()}
        self.tails: dict[str, deque[str]] = {}
        self.keep_lines = keep_lines
        self.reconnect_delay = reconnect_delay
        self.max_streams = max_streams
        self._pods: dict[str, Mapping[str, Any]] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._changed = asyncio.Event()
        self._counting = False  # set when the drain budget ran out: lines are counted, no longer relayed
        self.not_relayed: dict[str, int] = {}  # replica key -> lines counted instead of relayed
        self._where: dict[str, str] = {}  # replica key -> "-n <namespace> <pod> -c <container>"
        self._refused: set[str] = set()  # replica keys over ``max_streams``, named once
        #: Called after each relayed line (the cursor moved): the trigger persists the cursor from here.
        self.on_relayed: Callable[[], None] | None = None

    def update(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """Latest pods of the workload (from the shared pod watch): start streams for started containers."""
        current = {str((p.get("metadata") or {}).get("uid")): p for p in pods}
        self._pods = current
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()  # wakes every stream waiting for news of its pod
        for uid, pod in current.items():
            for container, key in stream_keys(pod):
                if (uid, container) in self._tasks or not _started(pod, container):
                    continue
                if len(self._tasks) >= self.max_streams:
                    self._refuse(key)
                    continue
                name = str((pod.get("metadata") or {}).get("name"))
                self._where[key] = f"-n {self.namespace} {name} -c {container}"
                task = asyncio.get_running_loop().create_task(self._follow(uid, container, key), name=key)
                self._tasks[(uid, container)] = task

    def never_read(self, deleted: Iterable[Mapping[str, Any]]) -> None:
        """Say which deleted pods' containers had started but were never streamed: their logs went with
        them (a replica the workload's controller stopped as the workload ended, before the relay saw it
        start), so their lines are not in the task log - said, never silent."""
        for pod in deleted:
            uid = str((pod.get("metadata") or {}).get("uid"))
            for container, key in stream_keys(pod):
                if (uid, container) in self._tasks or not _started(pod, container) or key in self._refused:
                    continue
                self._refused.add(key)
                self.log.warning(
                    "[%s] logs not relayed: pod %s was deleted before the relay could read them (a replica "
                    "still running when the workload ended is stopped by its clean pod policy)",
                    key,
                    (pod.get("metadata") or {}).get("name"),
                )

    def _refuse(self, key: str) -> None:
        if key not in self._refused:
            self._refused.add(key)
            self.log.warning(
                "[%s] logs not relayed: the relay follows at most %d streams; read them with kubectl logs",
                key,
                self.max_streams,
            )

    def last_lines(self, key: str) -> list[str]:
        return list(self.tails.get(key, ()))

    async def drain(self, timeout: float) -> None:
        """Wait, at most ``timeout`` seconds, until every stream has delivered its last lines. Usually at
        once: a finished container's log is finite, and a PyTorchJob's workers end with their master. On a
        loaded machine a stream's first read may only just be starting, and cutting it then loses the whole
        log (a 1 s budget did). Only a container that outlives the workload's end costs the full budget."""
        pending = [task for task in self._tasks.values() if not task.done()]
        if pending and timeout > 0:
            await asyncio.wait(pending, timeout=timeout)
        pending = [task for task in self._tasks.values() if not task.done()]
        if not pending:
            return
        self._counting = True  # the budget ran out: read on, briefly, to say how much is not relayed
        await asyncio.wait(pending, timeout=COUNT_SECONDS)
        for task in sorted(pending, key=lambda t: t.get_name()):
            self._report_not_relayed(task.get_name(), timeout, still_open=not task.done())

    def _report_not_relayed(self, key: str, budget: float, *, still_open: bool) -> None:
        count = self.not_relayed.get(key, 0)
        if not count and not still_open:
            return
        counted = f"{count:,} lines not relayed" if count else "lines not relayed"
        later = ", nor any later line (the stream was still open)" if still_open else ""
        self.log.warning(
            "[%s] %s%s: the log relay's drain budget (%.1f s) ran out; the whole log: kubectl logs %s",
            key,
            counted,
            later,
            budget,
            self._where.get(key, "<pod>"),
        )

    async def close(self) -> None:
        """Cancel every stream, again while one is still running: on Python 3.11 a cancellation that lands
        as a timed wait ends can be lost, and the stream would then follow a silent container to its end."""
        pending = [task for task in self._tasks.values() if not task.done()]
        for _ in range(CLOSE_ROUNDS):
            if not pending:
                break
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=CLOSE_ROUND_SECONDS)
            pending = [task for task in pending if not task.done()]
        for task in self._tasks.values():
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: a stream's failure was already logged where it happened

    # -- one container ----------------------------------------------------------------------------------
    async def _wait_for_change(self, timeout: float = 1.0) -> None:
        # asyncio.timeout, not wait_for: it never mistakes the caller's cancellation for its own timeout
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()

    async def _follow(self, uid: str, container: str, key: str) -> None:
        """Read, and read again after a cut, until the container's last instance has been read to its end.

        A read that relayed nothing new and failed counts as a failure; 20 in a row end the relay of this
        container (logs are best effort: the wait itself never depends on them).
        """
        failures = 0
        while True:
            pod = self._pods.get(uid)
            if pod is None:
                return
            if not _started(pod, container):
                await self._wait_for_change()
                continue
            complete_before = _finished(pod, container)
            before = self.cursor.get(key)
            try:
                await self._read(str((pod.get("metadata") or {}).get("name")), container, key)
            except ApiError as exc:
                if exc.status == 404 or self._counting:
                    return
                failures = 0 if self.cursor.get(key) != before else failures + 1
                if failures > 20:
                    self.log.warning(
                        "[%s] giving up on logs: %s; the whole log: kubectl logs %s",
                        key,
                        exc,
                        self._where[key],
                    )
                    return
            else:
                if complete_before or self._counting:
                    # read to the end after the container had exited: nothing more will come; or counted
                    # after the drain (a new read would count again from the cursor)
                    return
                # The stream ended: usually the container exited and its pod update is on its way.
                await self._wait_for_change(self.reconnect_delay)
                continue
            await asyncio.sleep(self.reconnect_delay * min(failures + 1, 10))

    async def _read(self, pod_name: str, container: str, key: str) -> None:
        request = log_request(
            self.namespace,
            pod_name,
            container=container,
            follow=True,
            timestamps=True,
            since_time=since_time(self.cursor.get(key)),
        )
        response = await self.kube.stream(request)
        line_filter = LineFilter(self.cursor.get(key))
        splitter = LineSplitter(self.max_line * 4 + _STAMP_BYTES)  # max_line characters of UTF-8 at most
        busy_since = time.perf_counter()
        try:
            async for chunk in _chunks(response.content):
                for raw, cut in splitter.feed(chunk):
                    self._relay(key, raw, cut, line_filter)
                    if time.perf_counter() - busy_since >= YIELD_EVERY:
                        await asyncio.sleep(0)  # a chunk holds thousands of lines: let others run
                        busy_since = time.perf_counter()
            last = splitter.end()
            if last is not None:
                self._relay(key, *last, line_filter)
        except Exception as exc:  # a cut connection: the caller resumes after the cursor
            raise ApiError(0, type(exc).__name__, str(exc)) from exc
        finally:
            response.close()
            self._say_over_pace(key)

    def _relay(self, key: str, raw: bytes, cut: int, line_filter: LineFilter) -> None:
        stamp, text = split_timestamp(raw.decode("utf-8", "replace").rstrip("\r"))
        if not line_filter.accept(stamp):
            return
        if self._counting:
            self.not_relayed[key] = self.not_relayed.get(key, 0) + 1
            return
        now = time.monotonic()
        text = cut_line(text, cut, self.max_line)
        self.tails.setdefault(key, deque(maxlen=self.keep_lines)).append(text)  # a failure's last lines
        if self._budget.take(now):
            with stamped(stamp):  # the log's own record of how far the relay got (.log_ledger)
                self.log.info("[%s] %s", key, text)
        else:
            self.over_pace[key] = self.over_pace.get(key, 0) + 1
        if self.over_pace.get(key) and now - self._said_at.get(key, 0.0) >= SAY_SKIPPED_EVERY:
            self._say_over_pace(key)
        moved = advance(self.cursor.get(key), stamp)
        if moved is not None:
            self.cursor[key] = moved
        if moved is not None and self.on_relayed is not None:
            self.on_relayed()

    def _say_over_pace(self, key: str) -> None:
        """One line for the lines of ``key`` left out over the pace since it was last said (if any)."""
        count = self.over_pace.pop(key, 0)
        if not count:
            return
        self._said_at[key] = time.monotonic()
        self.log.warning(
            "[%s] %s lines not relayed: over the log relay's pace of %g lines/s "
            "(log_relay_lines_per_second); the whole log: kubectl logs %s",
            key,
            f"{count:,}",
            self.lines_per_second,
            self._where.get(key, "<pod>"),
        )


def _chunks(content: Any) -> Any:
    """The stream's bytes as they arrive (aiohttp's ``iter_any``), whatever their line structure; a
    source without it (a test's line iterator) is read as it iterates."""
    iter_any = getattr(content, "iter_any", None)
    return iter_any() if iter_any is not None else content
