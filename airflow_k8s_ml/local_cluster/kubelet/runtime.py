"""Container instances as process groups: start, wait, signal, stop with a grace period.

Each instance runs in its own session (``start_new_session``), so a signal reaches the whole group the
way it reaches a container's processes, and when the main process exits the rest of the group is
killed, as a container's PID namespace dies with its PID 1. Exit codes follow the container runtime:
a process killed by signal N reports ``128 + N`` (the OS reports ``-N``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from .logfile import LogSink, pump

_PUMP_DRAIN = 2.0  # seconds to wait for output still held by processes that escaped the group


class StartError(Exception):
    """The process could not be started (reported as terminated, reason StartError, exit code 128)."""


def exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class ContainerProcess:
    """One running container instance and the tasks copying its output into its log."""

    def __init__(
        self, proc: asyncio.subprocess.Process, sink: LogSink, pumps: list[asyncio.Task[None]]
    ) -> None:
        self._proc = proc
        self._sink = sink
        self._pumps = pumps
        self.exited: asyncio.Task[int] = asyncio.ensure_future(self._wait())

    @classmethod
    async def spawn(cls, argv: list[str], env: dict[str, str], cwd: Path, sink: LogSink) -> ContainerProcess:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                cwd=str(cwd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise StartError(
                _start_message(f'exec: "{argv[0]}": executable file not found in $PATH')
            ) from None
        except PermissionError:
            raise StartError(_start_message(f'exec: "{argv[0]}": permission denied')) from None
        except OSError as exc:
            raise StartError(_start_message(f'exec: "{argv[0]}": {exc.strerror or exc}')) from None
        assert proc.stdout is not None and proc.stderr is not None
        pumps = [
            asyncio.ensure_future(pump(proc.stdout, "stdout", sink)),
            asyncio.ensure_future(pump(proc.stderr, "stderr", sink)),
        ]
        return cls(proc, sink, pumps)

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def _wait(self) -> int:
        returncode = await self._proc.wait()
        self.signal(signal.SIGKILL)  # the rest of the "container" dies with its main process
        _, pending = await asyncio.wait(self._pumps, timeout=_PUMP_DRAIN)
        for task in pending:
            task.cancel()
        self._sink.close()
        return exit_code(returncode)

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

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
                self.signal(signal.SIGKILL)
        return await asyncio.shield(self.exited)


def _start_message(detail: str) -> str:
    return f"failed to create containerd task: failed to start container process: {detail}: unknown"
