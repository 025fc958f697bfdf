"""The life of one pod on the node, from sandbox to final status (the kubelet's pod worker).

Sandbox (GPU indices, volumes, pod IP), init containers one after another, app containers together,
then the final status. A stop request (graceful deletion, eviction, activeDeadlineSeconds, the pod
vanishing, the cluster stopping) ends every container with its grace period; what is written
afterwards depends on why. All status goes through :meth:`PodWorker.publish`, which renders the whole
status from the container states (see :mod:`.status`) and writes it with ``store.mutate``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .. import errors
from ..meta import rfc3339
from ..node_reboot import resume_states
from ..resources import ResourceType
from ..services import ClusterServices
from ..settings import ClusterSettings
from ..store import Store
from . import fit, images, listeners, pod_dns, volumes
from .container import ContainerRunner
from .containment import Containment
from .devices import GpuAllocator
from .envvars import ConfigError, CreateContainerError, Sources, expand, resolve
from .identity import identity, verify_run_as_non_root
from .lifecycle import Launch, StopRequest
from .logfile import container_log_path
from .logs import LogRegistry
from .mounts import Mount, mount_table, rewriter
from .network import HOST_IP, IpAllocator, api_server_env, bind_shim_env
from .runtime import ContainerProcess, Credentials
from .status import ContainerState, kubelet_conditions, merge_conditions, pod_phase
from .usage import UsageMeter

Obj = dict[str, Any]
HOST_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH")  # host variables a process needs to run


class PodHost(Protocol):
    """What a pod worker (and its container runners) use of the kubelet that runs it: the node's
    allocators and logs, the store, and the lookups a pod's environment and volumes need. The kubelet
    provides it; the worker never imports the kubelet."""

    settings: ClusterSettings
    store: Store
    pods_rt: ResourceType
    ips: IpAllocator
    gpus: GpuAllocator
    logs: LogRegistry

    @property
    def cluster(self) -> ClusterServices: ...

    @property
    def containment(self) -> Containment: ...

    @property
    def usage(self) -> UsageMeter: ...

    def lookup(self, plural: str, namespace: str, name: str) -> Obj | None: ...

    def pod_ip_of(self, namespace: str) -> Callable[[str, str], str | None]: ...

    def worker_done(self, worker: PodWorker) -> None:
        """Called by a worker when it has stopped everything: release what the pod held."""
        ...


class PodWorker:
    def __init__(self, kubelet: PodHost, pod: Obj) -> None:
        self.kubelet = kubelet
        self.settings = kubelet.settings
        self.pod = pod  # latest stored object; read-only (it is the store's own copy)
        meta, spec = pod["metadata"], pod.get("spec") or {}
        self.uid, self.namespace, self.name = meta["uid"], meta.get("namespace", ""), meta["name"]
        self.init_states = [
            ContainerState(c.get("name", ""), c.get("image", "")) for c in spec.get("initContainers") or []
        ]
        self.main_states = [
            ContainerState(c.get("name", ""), c.get("image", "")) for c in spec.get("containers") or []
        ]
        resume_states(pod, self.init_states, self.main_states)  # restart counts go on after a cluster restart
        self.root = volumes.pod_dir(self.settings.state_dir, pod)
        self.rootfs = self.root / "rootfs"
        self.pod_ip = ""
        self.gpus: list[int] = []
        self.volume_dirs: dict[str, Path] = {}
        self.sandbox = False
        self.terminal = False
        self.forced: tuple[str, str, str] | None = None
        self.extra_conditions: list[Obj] = []
        self.stopping: StopRequest | None = None
        self.stop_event = asyncio.Event()
        self.kill_now = asyncio.Event()
        self.processes: set[ContainerProcess] = set()
        self.start_time = time.time()
        self.retry_interval = min(self.settings.crashloop_backoff_base, 2.0)
        self._sidecars: list[tuple[ContainerRunner, asyncio.Future[None]]] = []
        self._warned: set[str] = set()  # security warnings already recorded (once per pod)
        self.task: asyncio.Future[None] | None = None

    # -- helpers used by the container runners ------------------------------------------------------
    def event(self, type_: str, reason: str, message: str) -> None:
        if self.stopping is None or self.stopping.kind not in ("removed", "shutdown"):
            self.kubelet.cluster.events.record(self.pod, type_, reason, message, "kubelet")

    async def sleep_or_stop(self, seconds: float) -> bool:
        """Sleep; True when the pod is being stopped (the caller should give up)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop_event.wait(), max(seconds, 0))
        return self.stopping is not None

    def grace_period(self) -> int:
        grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return int(grace) if grace is not None else self.settings.default_grace_period

    def log_path(self, container: str, container_id: str) -> Path:
        return container_log_path(self.root, container, container_id)

    async def foreign_listener(self, port: int) -> str | None:
        """Why the listener reached at ``pod IP:port`` is not one of this pod's processes (None if it is,
        or if nothing listens): probes and the port check at start use it."""
        procs = list(self.processes)

        def check() -> str | None:
            return listeners.foreign_listener(self.pod_ip, port, [pid for p in procs for pid in p.pids()])

        return await asyncio.to_thread(check)

    def termination_file(self, container: str) -> Path:
        """``<pod dir>/termination/<container>`` (the directory is made with the pod's files)."""
        return self.root / "termination" / container

    # -- stopping ----------------------------------------------------------------------------------
    def request_stop(self, request: StopRequest) -> None:
        """First request wins the reason; a later one can only shorten the grace or silence the worker."""
        if self.stopping is None:
            self.stopping = request
            if request.kind == "evict":  # every status from now on carries it, as upstream's status func
                self._mark_evicted(request)
            self.stop_event.set()
        else:
            self.stopping.grace = min(self.stopping.grace, request.grace)
            if request.kind in ("removed", "shutdown"):
                self.stopping.kind = request.kind
        if self.stopping.grace <= 0:
            self.kill_now.set()

    def _mark_evicted(self, request: StopRequest) -> None:
        """Upstream's eviction manager hands the pod worker a status function (phase Failed, reason Evicted,
        ``DisruptionTarget`` TerminationByKubelet) applied to every status it writes while killing the pod:
        no status without the condition may show the containers dead (a Job would count it as a failure)."""
        self.forced = ("Failed", request.reason or "Evicted", request.message)
        self.extra_conditions = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "message": request.message,
            }
        ]

    def observe(self, pod: Obj) -> None:
        """A newer version of the pod was stored: deletion starts a graceful stop."""
        self.pod = pod
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            grace = meta.get("deletionGracePeriodSeconds")
            self.request_stop(
                StopRequest("delete", float(grace if grace is not None else self.grace_period()))
            )

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            await self._lifecycle()
        finally:
            await self._kill_all()
            self.kubelet.worker_done(self)

    async def _lifecycle(self) -> None:
        self.start_time = _parse_start(self.pod) or self.start_time
        self.publish()
        if self._rejected():
            return
        deadline = self._deadline_timer()
        try:
            if await self._setup() and await self._run_init():
                await self._run_main()
        finally:
            if deadline is not None:
                deadline.cancel()
        await self._finish()

    def _rejected(self) -> bool:
        """Kubelet admission: a pod bound without the scheduler must still fit the node."""
        used = fit.used_resources(
            self.kubelet.store.iter(self.kubelet.pods_rt), self.settings.node_name, self.uid
        )
        problem = fit.rejection(fit.pod_requests(self.pod), used, fit.node_capacity(self.settings.capacity))
        if problem is None:
            return False
        reason, message = problem
        self.event("Warning", reason, message.removeprefix("Pod was rejected: "))
        self.forced, self.terminal = ("Failed", reason, message), True
        self.publish()
        return True

    async def _setup(self) -> bool:
        wanted = int(fit.pod_requests(self.pod).get(fit.GPU, 0))
        while self.stopping is None:
            gpus = self.kubelet.gpus.allocate(self.uid, wanted) if wanted else []
            if gpus is not None:
                try:
                    loop = asyncio.get_running_loop()
                    self.volume_dirs = await asyncio.to_thread(self._prepare_files, loop)
                    self.gpus = gpus
                    break
                except (volumes.MountError, OSError) as exc:
                    self.event("Warning", "FailedMount", str(exc))
            if await self.sleep_or_stop(self.retry_interval):
                return False
        if self.stopping is not None:
            return False
        host_network = bool((self.pod.get("spec") or {}).get("hostNetwork"))
        self.pod_ip = HOST_IP if host_network else self.kubelet.ips.allocate(self.uid)
        self.sandbox = True
        waiting = "PodInitializing" if self.init_states else "ContainerCreating"
        for state in [*self.init_states, *self.main_states]:
            state.wait(waiting)
        self.publish()
        return True

    def _prepare_files(self, loop: asyncio.AbstractEventLoop) -> dict[str, Path]:
        """Volumes and the private root, in a worker thread (file I/O stays off the event loop); the
        Secrets and ConfigMaps they need are read on the loop, which owns the store."""

        def lookup(plural: str) -> volumes.Lookup:
            async def find(name: str) -> Obj | None:
                return self.kubelet.lookup(plural, self.namespace, name)

            return lambda name: asyncio.run_coroutine_threadsafe(find(name), loop).result(30)

        dirs = volumes.prepare(
            self.pod, self.root, self.settings.state_dir, lookup("secrets"), lookup("configmaps")
        )
        for sub in ("root", "tmp"):
            (self.rootfs / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "termination").mkdir(parents=True, exist_ok=True)
        return dirs

    def _deadline_timer(self) -> asyncio.TimerHandle | None:
        deadline = (self.pod.get("spec") or {}).get("activeDeadlineSeconds")
        if not deadline:
            return None
        message = "Pod was active on the node longer than the specified deadline"

        def expire() -> None:
            self.event("Normal", "DeadlineExceeded", message)
            self.request_stop(
                StopRequest("deadline", float(self.grace_period()), "DeadlineExceeded", message)
            )

        delay = max(self.start_time + float(deadline) - time.time(), 0)
        return asyncio.get_running_loop().call_later(delay, expire)

    async def _run_init(self) -> bool:
        spec = self.pod.get("spec") or {}
        for container, state in zip(spec.get("initContainers") or [], self.init_states, strict=False):
            runner = ContainerRunner(self, container, state, init=True)
            if container.get("restartPolicy") == "Always":
                if not await self._start_sidecar(runner):
                    return False
                continue
            await runner.run()
            if self.stopping is not None or (state.terminated or {}).get("exitCode", 1) != 0:
                return False
        for state in self.main_states:
            state.wait("ContainerCreating")
        self.publish()
        return True

    async def _start_sidecar(self, runner: ContainerRunner) -> bool:
        task = asyncio.ensure_future(runner.run())
        self._sidecars.append((runner, task))
        waiters = [
            asyncio.ensure_future(runner.started.wait()),
            asyncio.ensure_future(self.stop_event.wait()),
        ]
        await asyncio.wait([task, *waiters], return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        return runner.started.is_set() and self.stopping is None

    async def _run_main(self) -> None:
        spec = self.pod.get("spec") or {}
        runners = [
            ContainerRunner(self, c, s, init=False)
            for c, s in zip(spec.get("containers") or [], self.main_states, strict=False)
        ]
        await asyncio.gather(*(r.run() for r in runners))
        for runner, task in self._sidecars:
            runner.halt(float(self.grace_period()))
            await task

    async def _finish(self) -> None:
        self.kubelet.gpus.release(self.uid)  # before the terminal status lets the scheduler reuse them
        request = self.stopping
        if request is None or request.kind in ("removed", "shutdown"):
            self.terminal = request is None
            self.publish()
            return
        self.terminal = True
        if request.kind == "evict":
            self._mark_evicted(request)
        elif request.kind == "deadline":
            self.forced = ("Failed", request.reason, request.message)
        self.publish()
        if request.kind == "delete":
            with contextlib.suppress(errors.StatusError):
                self.kubelet.store.delete(
                    self.kubelet.pods_rt, self.namespace, self.name, grace_period=0, precondition_uid=self.uid
                )

    async def _kill_all(self) -> None:
        for proc in list(self.processes):
            proc.signal(signal.SIGKILL)
        for proc in list(self.processes):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(proc.exited), 5)

    # -- status ------------------------------------------------------------------------------------
    def publish(self) -> None:
        if self.stopping is not None and self.stopping.kind in ("removed", "shutdown"):
            return
        now = time.time()
        spec = self.pod.get("spec") or {}

        def apply(pod: Obj) -> None:
            if pod["metadata"].get("uid") != self.uid:
                return
            status = pod.setdefault("status", {})
            if self.forced is not None:
                phase, status["reason"], status["message"] = self.forced
            else:
                phase = pod_phase(spec, self.init_states, self.main_states, self.terminal)
                if phase in fit.TERMINAL_PHASES and self._any_running():
                    phase = "Running"  # terminal only once every container (sidecars too) has stopped
            status["phase"] = phase
            sandbox = self.sandbox and phase not in fit.TERMINAL_PHASES
            fresh = kubelet_conditions(spec, self.init_states, self.main_states, phase, sandbox)
            status["conditions"] = merge_conditions(
                status.get("conditions") or [], fresh + self.extra_conditions, now
            )
            status["hostIP"], status["hostIPs"] = HOST_IP, [{"ip": HOST_IP}]
            if self.pod_ip:
                status["podIP"], status["podIPs"] = self.pod_ip, [{"ip": self.pod_ip}]
            status["startTime"] = rfc3339(self.start_time)
            if self.init_states:
                status["initContainerStatuses"] = [s.render() for s in self.init_states]
            status["containerStatuses"] = [s.render() for s in self.main_states]

        updated = self.kubelet.store.mutate(self.kubelet.pods_rt, self.namespace, self.name, apply)
        if updated is not None and updated["metadata"].get("uid") == self.uid:
            self.pod = updated

    def _any_running(self) -> bool:
        return any(s.running for s in (*self.init_states, *self.main_states))

    # -- how a container is launched ---------------------------------------------------------------
    def launch_spec(self, container: Obj) -> Launch:
        """argv, environment and working directory of the next instance (raises ConfigError)."""
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        message_path = container.get("terminationMessagePath") or "/dev/termination-log"
        mounts = mount_table(
            container, self.volume_dirs, [Mount(message_path, str(self.termination_file(name)))]
        )
        rewrite = rewriter(mounts)
        service_env = api_server_env(self.kubelet.cluster.url)
        sources = Sources(
            secret=lambda n: self.kubelet.lookup("secrets", self.namespace, n),
            config_map=lambda n: self.kubelet.lookup("configmaps", self.namespace, n),
            allocatable=fit.node_capacity(self.settings.capacity),
        )
        spec_env = resolve(self.pod, container, sources, service_env, rewrite)
        subdomain = (self.pod.get("spec") or {}).get("subdomain")
        spec_env = pod_dns.rewrite(
            spec_env, self.namespace, subdomain, self.kubelet.pod_ip_of(self.namespace)
        )
        for warning in sources.warnings:
            self.event("Warning", "InvalidEnvironmentVariableNames", warning)
        mapping = {**service_env, **spec_env}
        command = [expand(rewrite(str(x)), mapping) for x in container.get("command") or []]
        args = [expand(rewrite(str(x)), mapping) for x in container.get("args") or []]
        argv = [*images.command_prefix(self.settings.images, image), *command, *args]
        if not argv:
            raise CreateContainerError(
                f'no command specified: the local cluster runs commands on the host and image "{image}" '
                "has no command prefix rule; set the container's command"
            )
        env = {**self._base_env(), **service_env, **spec_env}
        if not (self.pod.get("spec") or {}).get("hostNetwork"):
            env.update(bind_shim_env(self.pod_ip, spec_env.get("PYTHONPATH")))
        credentials = self._credentials(container, image)
        return Launch(argv, env, self._working_dir(container, rewrite), credentials)

    def _credentials(self, container: Obj, image: str) -> Credentials | None:
        """runAsNonRoot as the kubelet verifies it, then who the process runs as (raises ConfigError)."""
        image_uid = images.image_user(self.settings.images, image)
        problem = verify_run_as_non_root(self.pod, container, image_uid)
        if problem is not None and self.settings.run_as_non_root != "warn":
            raise ConfigError(problem)
        if problem is not None and problem not in self._warned:
            self._warned.add(problem)
            message = f"{problem}; started anyway (--run-as-non-root=warn)"
            self.event("Warning", "RunAsNonRootNotEnforced", message)
        who = identity(self.pod, container, image_uid)
        if who.ignored and str(who.ignored) not in self._warned:
            self._warned.add(str(who.ignored))
            self.event(
                "Warning",
                "SecurityContextIgnored",
                f"the local cluster runs as uid {os.geteuid()}, not root: {', '.join(who.ignored)} "
                f"not applied; container {container.get('name', '')} runs as uid {who.uid}",
            )
        if who.credentials is not None and who.credentials.uid is not None:
            self._hand_over(who.credentials)
        return who.credentials

    def _hand_over(self, credentials: Credentials) -> None:
        """The pod's private directories (HOME, TMPDIR, emptyDirs) belong to the user it runs as, as an
        image's directories and a volume with fsGroup would; hostPath and claim directories are left alone."""
        assert credentials.uid is not None
        gid = credentials.gid if credentials.gid is not None else -1
        spec = self.pod.get("spec") or {}
        private = [self.rootfs, self.rootfs / "root", self.rootfs / "tmp", self.root / "termination"]
        private += [
            self.volume_dirs[v["name"]]
            for v in spec.get("volumes") or []
            if "emptyDir" in v and v.get("name") in self.volume_dirs
        ]
        for path in private:
            with contextlib.suppress(OSError):
                os.chown(path, credentials.uid, gid)

    def _base_env(self) -> dict[str, str]:
        """What the image and runtime would provide: PATH (the cluster's Python first), HOME, TMPDIR."""
        env = {k: os.environ[k] for k in HOST_ENV if k in os.environ}
        host_path = os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
        env["PATH"] = f"{os.path.dirname(sys.executable)}:{host_path}"
        env["HOSTNAME"] = (self.pod.get("spec") or {}).get("hostname") or self.name
        env["HOME"] = str(self.rootfs / "root")
        env["TMPDIR"] = str(self.rootfs / "tmp")
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in self.gpus)
        if self.gpus:
            env["NVIDIA_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"]
        return env

    def _working_dir(self, container: Obj, rewrite: Any) -> Path:
        """workingDir on the host: under a volume it is rewritten, an existing host directory is used as
        is, anything else is created inside the pod's private root (``<pod dir>/rootfs``)."""
        wanted = container.get("workingDir")
        if not wanted:
            return self.rootfs
        rewritten = rewrite(wanted)
        if rewritten != wanted or Path(wanted).is_dir():
            path = Path(rewritten)
        else:
            path = self.rootfs / wanted.lstrip("/")
        path.mkdir(parents=True, exist_ok=True)
        return path


def _parse_start(pod: Obj) -> float | None:
    from ..meta import parse_time

    start = (pod.get("status") or {}).get("startTime")
    return parse_time(start) if start else None
