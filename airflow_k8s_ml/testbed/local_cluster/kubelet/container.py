"""One container's life inside a pod: pull, configure, start, watch, restart with back-off.

The loop mirrors what the kubelet's SyncPod does for a container: an image "pull" checked against the
image rules (ErrImagePull / ImagePullBackOff), configuration (CreateContainerConfigError while a Secret
or ConfigMap is missing), a process per instance with probes, and the restart decision from the pod's
restartPolicy with the CrashLoopBackOff back-off (first restart at once, then base, 2x base, ... cap).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import time
from pathlib import Path
from typing import Any, Protocol

from ..settings import ClusterSettings
from . import images
from .containment import Containment
from .envvars import ConfigError
from .lifecycle import Launch, StopRequest
from .logfile import LogSink, read_records
from .logs import LogRegistry
from .probes import ProbeLoop, Target, make_check
from .runtime import ContainerProcess, StartError
from .status import ContainerState, go_duration, pod_ref
from .usage import NO_CGROUP_REASON, UsageMeter, no_cgroup_message

Obj = dict[str, Any]
_MESSAGE_LIMIT = 4096
_FALLBACK_LINES, _FALLBACK_BYTES = 80, 2048


def _open_instance_files(log: Path, termination: Path) -> LogSink:
    """The instance's log file, and no termination message of an earlier instance (in a thread)."""
    termination.unlink(missing_ok=True)
    return LogSink(log)


class ContainerNode(Protocol):
    """What a container runner uses of the node: how processes are contained, where logs are found."""

    logs: LogRegistry

    @property
    def containment(self) -> Containment: ...

    @property
    def usage(self) -> UsageMeter: ...


class RunningPod(Protocol):
    """What a container runner uses of its pod's worker (:class:`~.worker.PodWorker` provides it): the
    pod, its stop signals, its files and processes, the launch spec, events and status publishing."""

    uid: str
    pod: Obj
    pod_ip: str
    settings: ClusterSettings
    stopping: StopRequest | None
    stop_event: asyncio.Event
    kill_now: asyncio.Event
    processes: set[ContainerProcess]
    retry_interval: float

    @property
    def kubelet(self) -> ContainerNode: ...

    def event(self, type_: str, reason: str, message: str) -> None: ...

    def publish(self) -> None: ...

    def grace_period(self) -> int: ...

    def launch_spec(self, container: Obj) -> Launch: ...

    def log_path(self, container: str, container_id: str) -> Path: ...

    def termination_file(self, container: str) -> Path: ...

    async def foreign_listener(self, port: int) -> str | None: ...


class ContainerRunner:
    def __init__(self, worker: RunningPod, container: Obj, state: ContainerState, init: bool) -> None:
        self.w = worker
        self.c = container
        self.state = state
        self.init = init
        self._backoff: float | None = None
        self._probe_kill = asyncio.Event()
        self._probe_grace = 0.0
        self._halted = asyncio.Event()
        self._halt_grace = 0.0
        self.started = asyncio.Event()  # set once started (startup probe passed): sidecars gate on it

    @property
    def name(self) -> str:
        return str(self.c.get("name", ""))

    def halt(self, grace: float) -> None:
        """Stop this container for good (a sidecar once the app containers are done)."""
        self._halt_grace = grace
        self._halted.set()

    async def _sleep(self, seconds: float) -> bool:
        """Sleep; True when this container must not go on (pod stopping or container halted)."""
        waiters = [asyncio.ensure_future(e.wait()) for e in (self.w.stop_event, self._halted)]
        await asyncio.wait(waiters, timeout=max(seconds, 0), return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        return self.w.stopping is not None or self._halted.is_set()

    # -- the loop ----------------------------------------------------------------------------------
    async def run(self) -> None:
        while self.w.stopping is None and not self._halted.is_set():
            if not await self._pull():
                return
            launch = await self._configure()
            if launch is None:
                return
            ran_for = await self._instance(launch)
            if self.w.stopping is not None or self._halted.is_set() or not self._should_restart():
                return
            if not await self._back_off(ran_for):
                return

    def _should_restart(self) -> bool:
        terminated = self.state.terminated or {}
        code = terminated.get("exitCode", 0)
        if self.c.get("restartPolicy") == "Always":  # a sidecar (restartable init container)
            return True
        policy = (self.w.pod.get("spec") or {}).get("restartPolicy") or "Always"
        if self.init:
            return code != 0 and policy != "Never"
        return policy == "Always" or (policy == "OnFailure" and code != 0)

    async def _back_off(self, ran_for: float) -> bool:
        """CrashLoopBackOff: the first restart is immediate; later ones wait base, 2x base, ... up to cap."""
        settings = self.w.settings
        if self._backoff is not None and ran_for > 2 * settings.crashloop_backoff_cap:
            self._backoff = None  # ran long enough: forget earlier crashes (upstream resets after 2x cap)
        if self._backoff is None:
            self._backoff = settings.crashloop_backoff_base
            return True
        delay = self._backoff
        message = (
            f"back-off {go_duration(delay)} restarting failed container={self.name} pod={pod_ref(self.w.pod)}"
        )
        self.state.wait("CrashLoopBackOff", message)
        self.w.event(
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {self.name} in pod {pod_ref(self.w.pod)}",
        )
        self.w.publish()
        self._backoff = min(delay * 2, settings.crashloop_backoff_cap)
        return not await self._sleep(delay)

    # -- steps -------------------------------------------------------------------------------------
    async def _pull(self) -> bool:
        image = str(self.c.get("image", ""))
        policy = self.c.get("imagePullPolicy") or "IfNotPresent"
        backoff: float | None = None
        settings = self.w.settings
        while True:
            result = images.pull(settings.images, image, policy)
            for type_, reason, message in result.events:
                self.w.event(type_, reason, message)
            if result.ok:
                return True
            self.state.wait(result.reason, result.message)
            self.w.publish()
            backoff = (
                settings.crashloop_backoff_base
                if backoff is None
                else min(backoff * 2, settings.crashloop_backoff_cap)
            )
            if await self._sleep(min(1.0, backoff)):
                return False
            if result.reason == "ErrImagePull":
                self.state.wait("ImagePullBackOff", f'Back-off pulling image "{image}"')
                self.w.event("Normal", "BackOff", f'Back-off pulling image "{image}"')
                self.w.event("Warning", "Failed", "Error: ImagePullBackOff")
                self.w.publish()
            if await self._sleep(backoff):
                return False

    async def _configure(self) -> Launch | None:
        while True:
            try:
                return self.w.launch_spec(self.c)
            except ConfigError as exc:
                self.state.wait(exc.reason, str(exc))
                self.w.event("Warning", "Failed", f"Error: {exc}")
                self.w.publish()
            if await self._sleep(self.w.retry_interval):
                return None

    async def _instance(self, launch: Launch) -> float:
        """Run one instance to its end; returns how long it ran."""
        container_id = "local://" + secrets.token_hex(32)
        termination = self.w.termination_file(self.name)
        log = self.w.log_path(self.name, container_id)
        sink = await asyncio.to_thread(_open_instance_files, log, termination)
        self.w.kubelet.logs.register(self.w.uid, container_id, sink)
        self._probe_kill.clear()  # a late probe result of the previous instance must not kill this one
        self.state.begin_instance(container_id, images.image_id(str(self.c.get("image", ""))))
        self.w.event("Normal", "Created", f"Created container: {self.name}")
        await self._check_ports()
        instance = self.w.kubelet.containment.instance()
        try:
            proc = await ContainerProcess.spawn(
                launch.argv, launch.env, launch.cwd, sink, instance, launch.credentials
            )
        except StartError as exc:
            await sink.close()
            await asyncio.to_thread(instance.close)
            self.state.terminate(128, "StartError", time.time(), str(exc))
            self.w.event("Warning", "Failed", f"Error: {exc}")
            self.w.publish()
            return 0.0
        started = time.time()
        self.state.run(started)
        self.w.event("Normal", "Started", f"Started container {self.name}")
        if not self.w.kubelet.usage.track(self.w.uid, self.name, instance):
            self.w.event("Warning", NO_CGROUP_REASON, no_cgroup_message(self.name))
        probes = self._start_probes(launch)
        self.w.publish()
        try:
            code = await self._wait(proc)
        finally:
            self.w.kubelet.usage.untrack(self.w.uid, self.name, instance)
            for task in probes:
                task.cancel()
        self.state.terminate(
            code,
            "Completed" if code == 0 else "Error",
            time.time(),
            self._termination_message(code, termination, sink.path),
        )
        self.w.publish()
        return time.time() - started

    async def _wait(self, proc: ContainerProcess) -> int:
        self.w.processes.add(proc)
        try:
            waiters = [
                asyncio.ensure_future(e.wait()) for e in (self.w.stop_event, self._probe_kill, self._halted)
            ]
            await asyncio.wait([proc.exited, *waiters], return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()
            if proc.exited.done():
                return proc.exited.result()
            if self.w.stopping is not None:
                if self.w.stopping.kind != "removed":
                    self.w.event("Normal", "Killing", f"Stopping container {self.name}")
                return await proc.stop(self.w.stopping.grace, self.w.kill_now)
            if self._halted.is_set():
                self.w.event("Normal", "Killing", f"Stopping container {self.name}")
                return await proc.stop(self._halt_grace, self.w.kill_now)
            self._probe_kill.clear()
            return await proc.stop(self._probe_grace, self.w.kill_now)
        finally:
            if not proc.exited.done():  # cancelled (cluster stopping): never leave the process behind
                proc.signal(signal.SIGKILL)
            self.w.processes.discard(proc)

    async def _check_ports(self) -> None:
        """A declared TCP port someone else already listens on (a host process on ``0.0.0.0:PORT``) would
        answer for this pod and make its own bind fail: say so, naming the port (probes then refuse to
        count that listener, see :meth:`.PodWorker.foreign_listener`)."""
        for declared in self.c.get("ports") or []:
            if (declared.get("protocol") or "TCP") != "TCP" or not declared.get("containerPort"):
                continue
            port = int(declared["containerPort"])
            problem = await self.w.foreign_listener(port)
            if problem is not None:
                self.w.event(
                    "Warning",
                    "PortInUse",
                    f"container {self.name} declares port {port}/TCP, which is already in use on the node: "
                    f"{problem}; connections to {self.w.pod_ip}:{port} reach that process, not this pod",
                )

    # -- probes ------------------------------------------------------------------------------------
    def _start_probes(self, launch: Launch) -> list[asyncio.Task[None]]:
        target = Target(
            self.w.pod_ip,
            list(self.c.get("ports") or []),
            launch.env,
            str(launch.cwd),
            self.w.foreign_listener,
        )
        tasks: list[asyncio.Task[None]] = []
        self._probe_grace = float(self.w.grace_period())

        def begin_steady_probes() -> None:
            self.state.started = True
            self.started.set()
            if self.c.get("readinessProbe"):
                tasks.append(self._loop("readinessProbe", target, False, self._on_readiness))
            else:
                self.state.ready = True
            if self.c.get("livenessProbe"):
                tasks.append(self._loop("livenessProbe", target, True, self._on_liveness))

        if self.c.get("startupProbe"):

            def on_startup(ok: bool, message: str) -> None:
                if ok:
                    begin_steady_probes()
                    self.w.publish()
                else:
                    self._kill_for_probe("startup", self.c["startupProbe"])

            tasks.append(self._loop("startupProbe", target, False, on_startup))
        else:
            begin_steady_probes()
        return tasks

    def _loop(self, kind: str, target: Target, initial: bool, on_change: Any) -> asyncio.Task[None]:
        probe = self.c[kind]
        label = {"readinessProbe": "Readiness", "livenessProbe": "Liveness", "startupProbe": "Startup"}[kind]

        def on_failure(message: str) -> None:
            self.w.event("Warning", "Unhealthy", f"{label} probe failed: {message}".rstrip())

        loop = ProbeLoop(
            probe, make_check(probe, target), self.w.settings.probe_time_scale, initial, on_change, on_failure
        )
        return asyncio.ensure_future(loop.run())

    def _on_readiness(self, ok: bool, message: str) -> None:
        if self.state.ready != ok and self.state.running:
            self.state.ready = ok
            self.w.publish()

    def _on_liveness(self, ok: bool, message: str) -> None:
        if not ok:
            self._kill_for_probe("liveness", self.c["livenessProbe"])

    def _kill_for_probe(self, kind: str, probe: Obj) -> None:
        self.w.event("Normal", "Killing", f"Container {self.name} failed {kind} probe, will be restarted")
        grace = probe.get("terminationGracePeriodSeconds")
        if grace is not None:
            self._probe_grace = float(grace)
        self._probe_kill.set()

    # -- termination message -----------------------------------------------------------------------
    def _termination_message(self, code: int, path: Path, log: Path) -> str:
        message = ""
        with contextlib.suppress(OSError):
            message = path.read_bytes()[:_MESSAGE_LIMIT].decode(errors="replace")
        if not message and code != 0 and self.c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            records, _ = read_records(log)
            text = b"".join(r.render(False) for r in records[-_FALLBACK_LINES:])
            message = text[-_FALLBACK_BYTES:].decode(errors="replace")
        return message
