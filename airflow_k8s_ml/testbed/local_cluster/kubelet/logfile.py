"""Container logs in the CRI file format, one file per container instance.

Each line is ``<RFC3339Nano> <stdout|stderr> <F|P> <content>`` (what containerd writes under
/var/log/pods): timestamps make ``timestamps=true``/``sinceTime`` answerable, and a separate file per
instance makes ``previous=true`` answerable. A :class:`LogSink` also wakes followers (``logs -f``) on
every write and tells them when the instance has exited.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

MAX_LINE = 16 * 1024  # longer lines are split into partial (P) records, as the CRI does


def rfc3339_nano(ns: int) -> str:
    seconds, nanos = divmod(ns, 1_000_000_000)
    stamp = dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{nanos:09d}Z"


def parse_rfc3339(value: str) -> float:
    """Seconds since the epoch for RFC 3339 with up to nanosecond precision (Python parses micro only)."""
    value = value.strip().replace("z", "Z")
    offset = "+00:00"
    if value.endswith("Z"):
        value = value[:-1]
    elif len(value) > 6 and value[-6] in "+-":
        value, offset = value[:-6], value[-6:]
    main, _, fraction = value.partition(".")
    base = dt.datetime.fromisoformat(main + offset).timestamp()
    return base + (float("0." + fraction) if fraction else 0.0)


@dataclass(frozen=True)
class Record:
    timestamp: str
    stream: str
    partial: bool
    content: bytes

    @property
    def seconds(self) -> float:
        return parse_rfc3339(self.timestamp)

    def render(self, timestamps: bool) -> bytes:
        prefix = self.timestamp.encode() + b" " if timestamps else b""
        return prefix + self.content + (b"" if self.partial else b"\n")


def parse_line(line: bytes) -> Record | None:
    parts = line.split(b" ", 3)
    if len(parts) < 3:
        return None
    content = parts[3] if len(parts) == 4 else b""
    return Record(parts[0].decode(), parts[1].decode(), parts[2] == b"P", content)


def read_records(path: Path, offset: int = 0) -> tuple[list[Record], int]:
    """Complete records from ``offset``; returns them and the offset after the last complete line."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    records = [r for line in data[:end].split(b"\n") if (r := parse_line(line)) is not None]
    return records, offset + end + 1


class RecordReader:
    """Complete records of one instance's file, read on from where the last read stopped, through one open
    file: as the kubelet's follower holds its file, a deleted pod (its files removed at once) still gives a
    follower every line its container wrote, and the stream then ends as the instance's does."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file: BinaryIO | None = None
        self._pending = b""

    def read(self) -> list[Record]:
        if self._file is None:
            try:
                self._file = self._path.open("rb")
            except FileNotFoundError:
                return []
        data = self._pending + self._file.read()
        end = data.rfind(b"\n")
        if end < 0:
            self._pending = data
            return []
        self._pending = data[end + 1 :]
        return [r for line in data[:end].split(b"\n") if (r := parse_line(line)) is not None]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class _Writer:
    """One thread writes every container log, so a slow disk never stalls the event loop; records of a
    sink are written in order, and its close after all of them."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="container-logs", daemon=True)
                self._thread.start()
        self._queue.put(job)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                job()
            except Exception:  # a log that cannot be written must not stop the others
                log.exception("writing a container log failed")


_WRITER = _Writer()


class LogSink:
    """The writing end for one container instance; followers await :meth:`changed`.

    Writes go to the log thread; followers are woken once a record is on disk, and ``closed`` turns
    true once the last record is, so a follower that sees it has read everything."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("ab")
        self.closed = False
        self._closing = False
        self._done: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[asyncio.Future[None]] = []

    def write(self, stream: str, content: bytes, partial: bool = False) -> None:
        if self._closing:
            return
        self._loop = self._loop or asyncio.get_running_loop()
        header = f"{rfc3339_nano(time.time_ns())} {stream} {'P' if partial else 'F'} ".encode()
        record = header + content + b"\n"
        _WRITER.submit(lambda: self._append(record))

    def close(self) -> asyncio.Future[None]:
        """Close once every pending record is written; the future resolves then."""
        self._loop = self._loop or asyncio.get_running_loop()
        if self._done is None:
            self._closing = True
            self._done = self._loop.create_future()
            _WRITER.submit(self._finish)
        return self._done

    def _append(self, record: bytes) -> None:
        self._file.write(record)
        self._file.flush()
        self._notify(self._wake)

    def _finish(self) -> None:
        self._file.close()
        self._notify(self._closed)

    def _notify(self, callback: Callable[[], None]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop stopped meanwhile
                self._loop.call_soon_threadsafe(callback)

    def _closed(self) -> None:
        self.closed = True
        self._wake()
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def changed(self, timeout: float) -> None:
        """Return after the next write or close, or after ``timeout``."""
        if self.closed:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            pass
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


async def pump(reader: asyncio.StreamReader, stream: str, sink: LogSink) -> None:
    """Copy a pipe into the sink line by line until EOF."""
    buffer = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            _write_line(sink, stream, line)
        while len(buffer) > MAX_LINE:
            sink.write(stream, buffer[:MAX_LINE], partial=True)
            buffer = buffer[MAX_LINE:]
    if buffer:
        sink.write(stream, buffer)


def _write_line(sink: LogSink, stream: str, line: bytes) -> None:
    while len(line) > MAX_LINE:
        sink.write(stream, line[:MAX_LINE], partial=True)
        line = line[MAX_LINE:]
    sink.write(stream, line)


def container_log_path(pod_root: Path, container: str, container_id: str) -> Path:
    """``<pod dir>/logs/<container>/<id>.log``: one file per instance, found again from the containerID."""
    return pod_root / "logs" / container / f"{container_id.rpartition('://')[2]}.log"
