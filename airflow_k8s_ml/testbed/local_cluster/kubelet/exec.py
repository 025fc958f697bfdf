"""``pods/exec``: a command run in a running container, streamed over a websocket.

What kubectl (1.30+, websockets by default: ``v5.channel.k8s.io``) and the Python clients
(``kubernetes.stream.stream(connect_get_namespaced_pod_exec, ...)``: ``v5``/``v4.channel.k8s.io``) speak;
the framing is in :mod:`.channels`. SPDY (kubectl's fallback, and kubectl <1.30) is not served: a request
without a websocket upgrade gets 400 ``Upgrade request required``, as upstream answers a plain request.

The command runs as the container's own processes do: the container's environment (its marker included,
so :mod:`.pgrep_shim` and the containment count it as the container's), working directory and user, its
mount paths rewritten to their host directories, and it joins the running instance's cgroup (or carries
its marker in tree mode), so whatever it starts ends with the container, as a process exec'd into a
container's PID namespace does. When the client goes away first, the command's process group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from .. import errors, routing
from . import channels
from .containment import Instance
from .lifecycle import Launch
from .runtime import child_setup, exit_code

if TYPE_CHECKING:
    from .worker import PodWorker

Handler = Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]
WorkerOf = Callable[[str, str], "PodWorker | None"]
_DRAIN = 2.0  # seconds for output still in the pipes once the command has exited
_READ = 65536


@dataclass(frozen=True)
class ExecRequest:
    """The query of an exec request (``command`` repeated, ``container``, the stream flags)."""

    command: list[str]
    container: str
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def _flag(query: Any, name: str) -> bool:
    return str(query.get(name, "")).lower() in ("true", "1")


def parse_request(query: Any) -> ExecRequest:
    command = list(query.getall("command", []))
    if not command:
        raise errors.bad_request("you must specify at least 1 command")
    request = ExecRequest(
        command,
        str(query.get("container", "")),
        _flag(query, "stdin"),
        _flag(query, "stdout"),
        _flag(query, "stderr"),
        _flag(query, "tty"),
    )
    if not (request.stdin or request.stdout or request.stderr):
        raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
    return request


def choose_container(pod: dict[str, Any], wanted: str) -> str:
    """The container named, or the only one; upstream's messages otherwise (pod strategy's
    ``validateContainer``)."""
    name = pod["metadata"]["name"]
    names = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    names += [c.get("name", "") for c in (pod.get("spec") or {}).get("initContainers") or []]
    if not wanted:
        if len(names) == 1:
            return str(names[0])
        raise errors.bad_request(
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
        )
    if wanted not in names:
        raise errors.bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def exec_handler(pods_rt: Any, store: Any, worker_of: WorkerOf, shim_dir: Path) -> Handler:
    """The handler registered for ``pods/exec`` (GET for websockets; POST too, as the apiserver)."""

    async def handle(request: web.Request, target: routing.Target) -> web.StreamResponse:
        namespace, name = target.namespace or "", target.name or ""
        pod = store.get(pods_rt, namespace, name)
        asked = parse_request(request.query)
        container = choose_container(pod, asked.container)
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            raise errors.bad_request(
                f"cannot exec into a container in a completed pod; current phase is {phase}"
            )
        worker = worker_of(namespace, name)
        running = worker.running.get(container) if worker is not None else None
        if worker is None or running is None:
            raise errors.bad_request(f'container not found ("{container}")')
        if request.headers.get("Upgrade", "").lower() != "websocket":
            raise errors.bad_request("Upgrade request required")
        launch = worker.exec_launch(
            _container_spec(worker.pod, container), asked.command, await _shims(shim_dir)
        )
        ws = web.WebSocketResponse(protocols=channels.EXEC_PROTOCOLS, autoping=True)
        await ws.prepare(request)
        protocol = channels.Protocol(ws.ws_protocol or channels.V1)
        # A second handle on the running instance: joining its cgroup must not touch the container's own.
        joined = Instance(running.instance.marker, running.instance.cgroup)
        session = _Session(ws, protocol, asked, launch, joined)
        stopper = asyncio.ensure_future(worker.stop_event.wait())
        try:
            await session.run(stopper)
        finally:
            stopper.cancel()
        return ws

    return handle


def _container_spec(pod: dict[str, Any], name: str) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return next(c for c in containers if c.get("name") == name)


async def _shims(shim_dir: Path) -> Path:
    """The directory put first on an exec'd command's PATH (its ``pgrep``), written once."""

    def write() -> Path:
        target = shim_dir / "pgrep"
        script = f"#!{sys.executable}\n" + (Path(__file__).parent / "pgrep_shim.py").read_text()
        if not target.exists() or target.read_text() != script:  # a state dir kept across upgrades
            shim_dir.mkdir(parents=True, exist_ok=True)
            tmp = shim_dir / f".pgrep.{os.getpid()}"
            tmp.write_text(script)
            tmp.chmod(0o755)
            tmp.replace(target)
        return shim_dir

    return await asyncio.to_thread(write)


class _Session:
    """One exec: the process, its pipes (or terminal) and the websocket, until the command ends."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        protocol: channels.Protocol,
        asked: ExecRequest,
        launch: Launch,
        instance: Instance,
    ) -> None:
        self.ws = ws
        self.protocol = protocol
        self.asked = asked
        self.launch = launch
        self.instance = instance
        self.proc: subprocess.Popen[bytes] | None = None
        self.master: int | None = None
        self._send_lock = asyncio.Lock()

    async def send(self, channel: int, data: bytes) -> None:
        message = channels.encode(self.protocol, channel, data)
        async with self._send_lock:
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                if isinstance(message, str):
                    await self.ws.send_str(message)
                else:
                    await self.ws.send_bytes(message)

    async def run(self, pod_stopping: asyncio.Future[Any]) -> None:
        try:
            self.proc = await asyncio.to_thread(self._spawn)
        except OSError as exc:
            detail = exc.strerror or str(exc)
            message = (
                "failed to exec in container: OCI runtime exec failed: exec failed: unable to start "
                f'container process: exec: "{self.asked.command[0]}": {detail}: unknown'
            )
            await self.send(channels.ERROR, channels.error_status(self.protocol, message))
            await self.ws.close()
            return
        finally:
            self.instance.spawned()
        outputs = self._output_pumps()
        exited = asyncio.ensure_future(_wait_exit(self.proc))
        inputs = asyncio.ensure_future(self._read_client())
        await asyncio.wait([exited, inputs, pod_stopping], return_when=asyncio.FIRST_COMPLETED)
        if not exited.done():  # the client left, or the pod is stopping: the command goes too
            self._kill()
            await exited
        inputs.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await inputs
        _, pending = await asyncio.wait(outputs, timeout=_DRAIN) if outputs else (set(), set())
        for task in pending:
            task.cancel()
        code = exit_code(exited.result())
        status = channels.exit_status(self.protocol, code, self.asked.command)
        if status is not None:
            await self.send(channels.ERROR, status)
        self._close_fds()
        await self.ws.close()

    # -- process -----------------------------------------------------------------------------------
    def _spawn(self) -> subprocess.Popen[bytes]:
        """fork/exec in a worker thread, joined to the container's instance (cgroup or marker)."""
        joined = child_setup(self.instance.preexec())
        creds = self.launch.credentials
        env = {**self.launch.env, **self.instance.env()}
        if self.asked.tty:
            master, slave = os.openpty()
            self.master = master

            def setup() -> None:
                joined()
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)

            try:
                return subprocess.Popen(
                    self.launch.argv,
                    env={**env, "TERM": env.get("TERM", "xterm")},
                    cwd=str(self.launch.cwd),
                    stdin=slave,
                    stdout=slave,
                    stderr=slave,
                    start_new_session=True,
                    preexec_fn=setup,
                    user=creds.uid if creds else None,
                    group=creds.gid if creds else None,
                    extra_groups=list(creds.groups) if creds and creds.groups is not None else None,
                )
            finally:
                os.close(slave)
        return subprocess.Popen(
            self.launch.argv,
            env=env,
            cwd=str(self.launch.cwd),
            stdin=subprocess.PIPE if self.asked.stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=joined,
            user=creds.uid if creds else None,
            group=creds.gid if creds else None,
            extra_groups=list(creds.groups) if creds and creds.groups is not None else None,
        )

    def _kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def _close_fds(self) -> None:
        if self.master is not None:
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = None

    # -- streams -----------------------------------------------------------------------------------
    def _output_pumps(self) -> list[asyncio.Task[None]]:
        assert self.proc is not None
        if self.master is not None:
            return [asyncio.ensure_future(self._pump_fd(self.master, channels.STDOUT))]
        pumps = []
        for pipe, channel, wanted in (
            (self.proc.stdout, channels.STDOUT, self.asked.stdout),
            (self.proc.stderr, channels.STDERR, self.asked.stderr),
        ):
            assert pipe is not None
            pumps.append(asyncio.ensure_future(self._pump_fd(pipe.fileno(), channel if wanted else None)))
        return pumps

    async def _pump_fd(self, fd: int, channel: int | None) -> None:
        """Copy a pipe (or the terminal) to its channel until EOF (``None``: read and drop)."""
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        os.set_blocking(fd, False)
        loop.add_reader(fd, readable.set)
        try:
            while True:
                await readable.wait()
                readable.clear()
                try:
                    data = os.read(fd, _READ)
                except BlockingIOError:
                    continue
                except OSError:  # EIO: the terminal's last holder is gone
                    return
                if not data:
                    return
                if channel is not None:
                    await self.send(channel, data)
        finally:
            loop.remove_reader(fd)

    async def _read_client(self) -> None:
        """Client messages: stdin, terminal resizes, v5's CLOSE of stdin; ends when the client closes."""
        async for message in self.ws:
            if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                break
            decoded = channels.decode(self.protocol, message.data)
            if decoded is None:
                continue
            channel, payload = decoded
            if channel == channels.STDIN and payload:
                await self._write_stdin(payload)
            elif channel == channels.RESIZE:
                self._resize(payload)
            elif channel == channels.CLOSE and self.protocol.can_close and payload[:1] == b"\x00":
                self._close_stdin()
        await asyncio.Future()  # the client is gone: wait to be cancelled (the caller kills the command)

    async def _write_stdin(self, data: bytes) -> None:
        assert self.proc is not None
        if self.master is not None:
            await asyncio.to_thread(os.write, self.master, data)
        elif self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError, ValueError):
                await asyncio.to_thread(_write_all, self.proc.stdin, data)

    def _close_stdin(self) -> None:
        assert self.proc is not None
        if self.master is not None:
            with contextlib.suppress(OSError):
                os.write(self.master, b"\x04")  # EOF at the start of a terminal line
        elif self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def _resize(self, payload: bytes) -> None:
        size = channels.resize(payload)
        if size is not None and self.master is not None:
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))


def _write_all(pipe: Any, data: bytes) -> None:
    pipe.write(data)
    pipe.flush()


async def _wait_exit(proc: subprocess.Popen[bytes]) -> int:
    """The command's return code, seen through a pidfd (no thread held for the session's length)."""
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        while proc.poll() is None:
            await asyncio.sleep(0.05)
        return proc.returncode
    exited = asyncio.Event()
    loop.add_reader(fd, exited.set)
    try:
        await exited.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return proc.wait()
