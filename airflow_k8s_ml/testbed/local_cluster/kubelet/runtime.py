"""Container instances as contained process trees: start, wait, signal, stop with a grace period.

Each instance runs in its own session (``start_new_session``), so SIGTERM reaches its process group the
way a stop reaches a container, and it is contained (:mod:`.containment`): when the main process exits,
every process it started is killed, ``setsid`` ones included, as a container's PID namespace dies with its
PID 1. The container ends when its main process exits, whoever still holds its stdout.

Nothing here blocks the event loop: the fork/exec runs in a worker thread, the exit is seen through a
pidfd (a file descriptor that becomes readable when the process exits), killing the tree runs in a thread.
Exit codes follow the container runtime: a process killed by signal N reports ``128 + N``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import LocalClusterError
from .containment import Instance
from .logfile import LogSink, pump

_PUMP_DRAIN = 2.0  # seconds to wait for output still buffered in the pipes after the tree is gone
_POLL = 0.05  # exit polling where pidfds do not exist (not Linux)


class StartError(LocalClusterError):
    """The process could not be started (reported as terminated, reason StartError, exit code 128)."""


@dataclass(frozen=True)
class Credentials:
    """Who the process runs as (securityContext); None keeps the kubelet's own."""

    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] | None = None


def exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class ContainerProcess:
    """One running container instance, its contained process tree and the tasks copying its output."""

    def __init__(self, proc: subprocess.Popen[bytes], instance: Instance, sink: LogSink) -> None:
        self._proc = proc
        self._instance = instance
        self._sink = sink
        loop = asyncio.get_running_loop()
        self._main_exit: asyncio.Future[int] = loop.create_future()
        self._poller: asyncio.Future[None] | None = None
        self._pumps = [
            asyncio.ensure_future(_pump_pipe(proc.stdout, "stdout", sink)),
            asyncio.ensure_future(_pump_pipe(proc.stderr, "stderr", sink)),
        ]
        self._watch_exit(loop)
        self.exited: asyncio.Task[int] = asyncio.ensure_future(self._wait())

    @classmethod
    async def spawn(
        cls,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        sink: LogSink,
        instance: Instance,
        credentials: Credentials | None = None,
    ) -> ContainerProcess:
        creds = credentials or Credentials()
        try:
            proc = await asyncio.to_thread(_popen, argv, {**env, **instance.env()}, cwd, instance, creds)
        except FileNotFoundError:
            raise StartError(
                _start_message(f'exec: "{argv[0]}": executable file not found in $PATH')
            ) from None
        except PermissionError:
            raise StartError(_start_message(f'exec: "{argv[0]}": permission denied')) from None
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "strerror", None) or str(exc)
            raise StartError(_start_message(f'exec: "{argv[0]}": {detail}')) from None
        finally:
            instance.spawned()
        instance.spawned(proc.pid)
        return cls(proc, instance, sink)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def instance(self) -> Instance:
        """The instance's containment handle (``pods/exec`` joins it)."""
        return self._instance

    def pids(self) -> list[int]:
        """Every live process of the instance, the main one included (blocking: reads /proc)."""
        return sorted({self._proc.pid, *self._instance.pids()})

    def _watch_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            fd = os.pidfd_open(self._proc.pid)
        except (AttributeError, OSError):
            self._poller = asyncio.ensure_future(self._poll_exit())
            return

        def readable() -> None:
            loop.remove_reader(fd)
            os.close(fd)
            self._reaped()

        loop.add_reader(fd, readable)

    async def _poll_exit(self) -> None:
        while self._proc.poll() is None:
            await asyncio.sleep(_POLL)
        self._reaped()

    def _reaped(self) -> None:
        returncode = self._proc.wait()  # immediate: the process has exited
        if not self._main_exit.done():
            self._main_exit.set_result(returncode)

    async def _wait(self) -> int:
        returncode = await self._main_exit
        await asyncio.to_thread(self._instance.kill)  # the rest of the "container" dies with its main process
        _, pending = await asyncio.wait(self._pumps, timeout=_PUMP_DRAIN)
        for task in pending:
            task.cancel()
        await asyncio.to_thread(self._instance.close)
        # Last: closing the log ends `logs -f`, and the caller publishes the exit without awaiting more.
        await self._sink.close()
        return exit_code(returncode)

    def signal(self, sig: int) -> None:
        """Signal the main process's group; SIGKILL also goes to every process of the instance."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)
        if sig == signal.SIGKILL:
            self._instance.signal_all(sig)

    async def stop(self, grace: float, kill_now: asyncio.Event | None = None) -> int:
        """SIGTERM the group, wait up to ``grace`` seconds (less if ``kill_now`` is set), then SIGKILL."""
        if not self.exited.done():
            if grace > 0:
                self.signal(signal.SIGTERM)
                waiters: list[asyncio.Future[object]] = [asyncio.ensure_future(asyncio.shield(self.exited))]
                if kill_now is not None:
                    waiters.append(asyncio.ensure_future(kill_now.wait()))
                _, pending = await asyncio.wait(waiters, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
            if not self.exited.done():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                await asyncio.to_thread(self._instance.kill)
        return await asyncio.shield(self.exited)


_CATCHABLE = tuple(
    s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP) and s < signal.SIGRTMIN
)


def child_setup(join: Callable[[], None] | None) -> Callable[[], None]:
    """What runs in a container's child between fork and exec: default signal dispositions and an empty
    signal mask, as a container runtime starts every process, then ``join`` (the instance's cgroup).

    Why: a kubelet started in the background of a non-interactive shell ignores SIGINT and SIGQUIT, and
    ignored signals survive exec: a container's ``trap "exit 0" INT`` (the cncf provider's XCom sidecar)
    would then never fire, as POSIX shells may not trap a signal ignored on entry."""

    def setup() -> None:
        for sig in _CATCHABLE:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        if join is not None:
            join()

    return setup


def _popen(
    argv: list[str], env: dict[str, str], cwd: Path, instance: Instance, creds: Credentials
) -> subprocess.Popen[bytes]:
    """fork/exec in a worker thread (a fork of a large process takes milliseconds)."""
    return subprocess.Popen(
        argv,
        env=env,
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=child_setup(instance.preexec()),
        user=creds.uid,
        group=creds.gid,
        extra_groups=list(creds.groups) if creds.groups is not None else None,
        close_fds=True,
    )


async def _pump_pipe(pipe: object, stream: str, sink: LogSink) -> None:
    """Copy one of the process's pipes into the log until EOF (every holder of its write end is gone)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        await pump(reader, stream, sink)
    finally:
        transport.close()


def _start_message(detail: str) -> str:
    return f"failed to create containerd task: failed to start container process: {detail}: unknown"
