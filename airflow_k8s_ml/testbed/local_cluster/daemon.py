"""Run the local cluster in the foreground until SIGTERM/SIGINT, and start/stop it as a background
process for ``airflow-k8s-ml local up|down|status``.

The background process writes ``<state>/server.pid`` and ``<state>/kubeconfig``; ``up`` returns once the
server answers ``/readyz`` with the token, so a script can use the cluster on the next line.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .settings import ClusterSettings, ImageRule, NodeCapacity, QueueQuota, allow_list

DEFAULT_STATE_DIR = Path(
    os.environ.get("AIRFLOW_K8S_ML_STATE_DIR", Path.home() / ".airflow-k8s-ml" / "local")
)


@dataclass
class ServeOptions:
    state_dir: Path = DEFAULT_STATE_DIR
    port: int = 0
    cpu: str = "8"
    memory: str = "32Gi"
    gpus: int = 0
    # Kueue's default queue with this GPU quota (None: no queue is created).
    gpu_quota: int | None = None
    tls: bool = True
    deny_host_path: bool = False
    run_as_non_root: str = "enforce"
    # Image rules (``--image-rules FILE``: a JSON list of ImageRule fields) and an allow-list
    # (``--allow-image PATTERN``): with an allow-list, any other image is one the registry does not have.
    image_rules: Path | None = None
    allow_images: tuple[str, ...] = ()

    def images(self) -> list[ImageRule]:
        """The rules, first match wins: the file's, then the allow-list's, then (with an allow-list) every
        other image refused as not found."""
        rules = load_image_rules(self.image_rules) if self.image_rules is not None else []
        return rules + (allow_list(self.allow_images) if self.allow_images else [])

    def settings(self) -> ClusterSettings:
        return ClusterSettings(
            images=self.images(),
            state_dir=self.state_dir,
            port=self.port,
            tls=self.tls,
            capacity=NodeCapacity(cpu=self.cpu, memory=self.memory, gpus=self.gpus),
            deny_host_path=self.deny_host_path,
            run_as_non_root=self.run_as_non_root,
            queue_quota=(
                QueueQuota(gpus=self.gpu_quota, cpu=self.cpu, memory=self.memory)
                if self.gpu_quota is not None
                else None
            ),
        )

    def argv(self) -> list[str]:
        args = [
            "--state-dir",
            str(self.state_dir),
            "--port",
            str(self.port),
            "--cpu",
            self.cpu,
            "--memory",
            self.memory,
            "--gpus",
            str(self.gpus),
        ]
        if self.gpu_quota is not None:
            args += ["--gpu-quota", str(self.gpu_quota)]
        policy = ["--run-as-non-root", self.run_as_non_root]
        policy += ["--deny-host-path"] if self.deny_host_path else []
        policy += ["--image-rules", str(self.image_rules)] if self.image_rules is not None else []
        for pattern in self.allow_images:
            policy += ["--allow-image", pattern]
        return args + ([] if self.tls else ["--no-tls"]) + policy


def load_image_rules(path: Path) -> list[ImageRule]:
    """``--image-rules FILE``: a JSON list of rules, each ``{"pattern": "ghcr.io/acme/*", "allow": true,
    "missing": false, "user": 65532, "command_prefix": []}`` (only ``pattern`` required). A bad file is an
    error naming it and the rule, before the server starts."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--image-rules {path}: {exc}") from None
    if not isinstance(entries, list):
        raise SystemExit(f"--image-rules {path}: expected a JSON list of rules, got {type(entries).__name__}")
    rules = []
    for index, entry in enumerate(entries):
        try:
            rule = ImageRule(**entry)
            rule.command_prefix = tuple(rule.command_prefix)
            if not isinstance(rule.pattern, str) or not rule.pattern:
                raise TypeError("pattern must be a non-empty string")
        except TypeError as exc:
            raise SystemExit(f"--image-rules {path}: rule {index}: {exc}") from None
        rules.append(rule)
    return rules


def return_freed_memory() -> None:
    """Make glibc give large freed blocks back to the system (Linux only; a no-op elsewhere).

    glibc serves allocations over M_MMAP_THRESHOLD (128 KiB) with mmap and unmaps them when freed, but
    raises that threshold to the size of each such block freed (up to 32 MiB). After the first 1 MiB
    object went by, every later event buffer, TLS buffer and JSON string of up to that size came from
    the heap, where freed memory stays: the server's RSS kept what many watchers once needed after they
    closed. Setting the threshold explicitly turns the adjustment off (mallopt(3)).
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        pass


def serve_forever(options: ServeOptions) -> None:
    from .cluster import LocalCluster

    return_freed_memory()

    async def main() -> None:
        cluster = LocalCluster(options.settings())
        await cluster.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        (options.state_dir / "server.pid").write_text(str(os.getpid()))
        print(f"local cluster serving at {cluster.url}", flush=True)
        await stop.wait()
        await cluster.stop()

    try:
        asyncio.run(main())
    finally:
        (options.state_dir / "server.pid").unlink(missing_ok=True)


def pid_of(state_dir: Path) -> int | None:
    try:
        pid = int((state_dir / "server.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if alive(pid) else None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a server killed with ``kill -9`` whose parent has not
    reaped it yet still answers ``kill(pid, 0)``, but it serves nothing and holds no lock)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs (macOS): kill(pid, 0) is all we know
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def start_background(options: ServeOptions, timeout: float = 30.0) -> Path:
    """Start the server as a detached process; return the kubeconfig path once it answers."""
    if pid_of(options.state_dir) is not None and ping(options.state_dir):
        return options.state_dir / "kubeconfig"
    options.state_dir.mkdir(parents=True, exist_ok=True)
    (options.state_dir / "kubeconfig").unlink(missing_ok=True)
    log = open(options.state_dir / "server.log", "ab")  # noqa: SIM115 - handed to the child
    child = subprocess.Popen(
        [sys.executable, "-m", "airflow_k8s_ml.testbed.local_cluster", "serve", *options.argv()],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ping(options.state_dir):
            return options.state_dir / "kubeconfig"
        if child.poll() is not None:  # it died (e.g. the port is taken): say why at once
            tail = (options.state_dir / "server.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError("local cluster failed to start: " + " | ".join(tail))
        time.sleep(0.1)
    raise RuntimeError(
        f"local cluster did not become ready in {timeout:.0f}s; see {options.state_dir}/server.log"
    )


def stop_background(state_dir: Path, timeout: float = 40.0) -> bool:
    pid = pid_of(state_dir)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    os.killpg(pid, signal.SIGKILL)
    return True


def _endpoint(state_dir: Path) -> tuple[str, str, ssl.SSLContext | None] | None:
    import yaml

    path = state_dir / "kubeconfig"
    if not path.exists():
        return None
    config = yaml.safe_load(path.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"]["token"]
    ctx = None
    if server.startswith("https"):
        ctx = ssl.create_default_context(cafile=str(state_dir / "ca.crt"))
    return server, token, ctx


def request(state_dir: Path, path: str, method: str = "GET", body: dict | None = None) -> dict:
    endpoint = _endpoint(state_dir)
    if endpoint is None:
        raise RuntimeError("local cluster is not running")
    server, token, ctx = endpoint
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        server + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        raw = resp.read()
    try:
        return json.loads(raw)
    except ValueError:
        return {"text": raw.decode()}


def ping(state_dir: Path) -> bool:
    try:
        return request(state_dir, "/readyz").get("text") == "ok"
    except Exception:
        return False
