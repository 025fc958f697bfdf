"""Real Airflow components on one machine: api-server, scheduler, dag-processor and triggerer.

What ``make demo``, ``airflow-k8s-ml standalone`` and the production-mode tests run the DAGs under, instead of
``airflow dags test`` (one process, triggers run inline, a logical date always set). Each component is the
stock ``airflow <component>`` command in its own session (process group), LocalExecutor on SQLite in an
``AIRFLOW_HOME`` of its own, bound to 127.0.0.1 on a free port, with every URL that depends on the port set
from it (the API's base URL and the execution API URL the task processes call back on). A component can be
killed (``kill -9`` of its whole tree, as a crashed pod or host would) and started again, which is how the
fault tests inject failures.

Stopping takes the whole process trees: the LocalExecutor's workers and their task processes, the
triggerer's runner subprocess, the API server's workers. Nothing is left running and no port is held.

``ha=True`` is Airflow as a team runs it past one machine: PostgreSQL and Redis of their own
(:mod:`.backing_services`), the CeleryExecutor with two Celery workers, two schedulers, two triggerers, the
dag-processor and the API server, all on loopback and all started and stopped as one. Instances of one
component are named ``scheduler-1``, ``scheduler-2``...; each can be killed on its own. The triggerers'
heartbeat and health-check threshold are short, so a dead triggerer's triggers move within seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from airflow_k8s_ml.testbed.airflow_rest import AirflowRest

if TYPE_CHECKING:
    from airflow_k8s_ml.testbed.backing_services import PostgresServer, RedisServer

__all__ = [
    "COMPONENTS",
    "HA_COMPONENTS",
    "AirflowStack",
    "StackSettings",
    "command",
    "free_port",
    "kill_tree",
    "port_is_free",
]

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
HA_COMPONENTS = (
    "api-server",
    "dag-processor",
    "scheduler-1",
    "scheduler-2",
    "triggerer-1",
    "triggerer-2",
    "worker-1",
    "worker-2",
)
#: The scheduler (its LocalExecutor), the triggerer and a Celery worker would each start a log server on a
#: fixed port (8793, 8794) bound to every interface. On one machine the API server reads the task logs from
#: the files directly, so they are not started: nothing listens beyond 127.0.0.1 and two stacks never clash.
COMMAND_ARGS = {"scheduler": ["--skip-serve-logs"], "triggerer": ["--skip-serve-logs"]}
ADMIN = "admin"
AIRFLOW = str(Path(sys.executable).parent / "airflow")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on it now (SO_REUSEADDR, as uvicorn binds: TIME_WAIT is no owner)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _tree(pid: int) -> list[Any]:
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(*pids: int, sig: int = signal.SIGTERM, grace: float = 15.0) -> None:
    """Signal processes, their sessions and every descendant; SIGKILL whatever is left after ``grace``.

    The descendants are collected before the first signal: once a parent dies its children are
    reparented and can no longer be found from it. Several trees are stopped together, so their grace
    periods overlap.
    """
    import psutil

    procs = [proc for pid in pids for proc in _tree(pid)]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(sig)
    for pid in pids:  # each component leads its own session: catch what left the tree (setsid aside)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
    _, alive = psutil.wait_procs(procs, timeout=grace if sig != signal.SIGKILL else 5.0)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5.0)


@dataclass(frozen=True)
class StackSettings:
    """Where the stack keeps its state and what it runs.

    ``env`` holds what the DAGs need (connections as ``AIRFLOW_CONN_*``, provider options); ``port`` 0
    picks a free one. ``low_latency`` shortens the scheduler's and triggerer's idle loops so a short DAG
    is not dominated by polling intervals meant for thousands of DAGs.
    """

    home: Path
    dags_folder: Path
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    parallelism: int = 16
    low_latency: bool = True
    components: tuple[str, ...] | None = None  # default: COMPONENTS, or HA_COMPONENTS with ``ha``
    ha: bool = False
    worker_concurrency: int = 16  # task slots per Celery worker (``ha``)

    @property
    def fleet(self) -> tuple[str, ...]:
        return self.components or (HA_COMPONENTS if self.ha else COMPONENTS)


def command(name: str, settings: StackSettings) -> list[str]:
    """The ``airflow`` arguments of a component instance: ``triggerer-2`` runs ``airflow triggerer``."""
    kind = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name
    if kind == "worker":
        return [
            "celery",
            "worker",
            "--celery-hostname",
            f"{name}@%h",
            "--concurrency",
            str(settings.worker_concurrency),
            "--skip-serve-logs",
        ]
    return [kind, *COMMAND_ARGS.get(kind, [])]


class AirflowStack:
    """Start, fault and stop the four components; a REST client logged in as the admin."""

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.home = settings.home.resolve()
        self.port = settings.port or free_port()
        self.password = self._password()
        self.env = self._environment()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.sessions: set[int] = set()  # every component leads a session of its own
        self._logs: dict[str, IO[bytes]] = {}
        self.rest = AirflowRest(self.url, ADMIN, self.password)
        self.postgres: PostgresServer | None = None
        self.redis: RedisServer | None = None

    # -- configuration ----------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _password(self) -> str:
        """The admin's password: made once per AIRFLOW_HOME (mode 0600) and kept, so it can be shown on
        every start (stock standalone prints it only the first time)."""
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / "passwords.json"
        if path.exists():
            return str(json.loads(path.read_text())[ADMIN])
        password = secrets.token_urlsafe(12)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({ADMIN: password}, out)
        return password

    def _secret(self, name: str) -> str:
        """A secret shared by every component (JWT signing), kept in AIRFLOW_HOME with mode 0600."""
        path = self.home / f"{name}.secret"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(64))  # 86 characters: over HS512's 64-byte minimum
        return path.read_text().strip()

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.settings.dags_folder.resolve()),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": str(self.settings.parallelism),
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.url,
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
                "AIRFLOW__API_AUTH__JWT_SECRET": self._secret("jwt"),
                "AIRFLOW__API__SECRET_KEY": self._secret("api"),
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.settings.low_latency:
            env.update(
                {
                    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.1",
                    # How late a deferring task's exit may reach the scheduler (the supervisor's select
                    # timeout): the triggers' hold after a deferral follows it (min_deferral_seconds).
                    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
                    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
                }
            )
        env.update(self.settings.env)
        return env

    def _ha_environment(self) -> dict[str, str]:
        """PostgreSQL, Celery on Redis, and health checks short enough to see a dead component in seconds."""
        assert self.postgres is not None and self.redis is not None
        return {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url,
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CELERY__BROKER_URL": self.redis.url,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.postgres.url,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.settings.worker_concurrency),
            # a dead triggerer's triggers go to the other once its heartbeat is this old (default 30). Not
            # lower: at a load average of 40 on 2 cores heartbeats came 6-7 s late, and a live triggerer
            # whose triggers are taken runs them beside the new owner until it notices.
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "15",
            # a dead scheduler's queued task instances are adopted by the other. The threshold stays at
            # Airflow's 30 s: at 5 s, schedulers whose heartbeats came 6-7 s late under load reset each
            # other's running tasks as orphans (every task of a run failed its first try).
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "5",
            # a task whose Celery worker died stops heartbeating: failed (and retried) after this long (300 by
            # default; 30 failed live tasks whose supervisors starved at a load average of 30 on 2 cores)
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
            # a task's calls to the execution API (default 5 s, 5 retries): eight tasks starting at once on
            # a loaded 2-core machine failed their first try there (ReadTimeout), before any of our code ran
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        }

    # -- lifecycle --------------------------------------------------------------------------------------
    def migrate(self) -> None:
        result = subprocess.run(
            [AIRFLOW, "db", "migrate"], env=self.env, capture_output=True, text=True, timeout=600
        )
        if result.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{result.stdout[-2000:]}{result.stderr[-4000:]}")

    def start_component(self, name: str) -> subprocess.Popen[bytes]:
        log_dir = self.home / "logs" / "components"
        log_dir.mkdir(parents=True, exist_ok=True)
        log = (log_dir / f"{name}.log").open("ab")
        self._logs[name] = log
        proc = subprocess.Popen(
            [AIRFLOW, *command(name, self.settings)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs[name] = proc
        self.sessions.add(proc.pid)
        return proc

    def kill_component(self, name: str, sig: int = signal.SIGKILL) -> None:
        """``kill -9`` (by default) of the component's whole tree, as when its host or pod dies."""
        proc = self.procs.pop(name)
        kill_tree(proc.pid, sig=sig)
        proc.wait(timeout=30)
        self._logs.pop(name).close()

    def start(self, timeout: float = 180.0) -> AirflowStack:
        if self.settings.ha:
            self._start_backends()
        self.migrate()
        for name in self.settings.fleet:
            self.start_component(name)
        self.wait_healthy(timeout)
        return self

    def _start_backends(self) -> None:
        from airflow_k8s_ml.testbed.backing_services import PostgresServer, RedisServer, missing_backends

        why = missing_backends()
        if why:
            raise RuntimeError(f"the HA stack needs {why}")
        self.postgres = PostgresServer(self.home).start()
        self.redis = RedisServer(self.home).start()
        self.env.update(self._ha_environment())

    def wait_healthy(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.rest.healthy():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"airflow {name} exited with {proc.returncode}: {self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the API server did not answer on {self.url} within {timeout:.0f}s")
            time.sleep(0.3)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.home / "logs" / "components" / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def component_log(self, name: str) -> str:
        path = self.home / "logs" / "components" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """SIGTERM every component's tree (graceful: running tasks are told to stop), then SIGKILL."""
        procs, self.procs = self.procs, {}
        kill_tree(*(proc.pid for proc in procs.values()), sig=signal.SIGTERM)
        for proc in procs.values():
            proc.wait(timeout=30)
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        self.rest.close()
        for backend in (self.redis, self.postgres):  # after Airflow: nothing is left to reconnect
            if backend is not None:
                backend.stop()

    def leftovers(self) -> list[str]:
        """Processes still running in a session a component led (task and log processes included).

        Found by session id rather than by environment: Airflow's processes rewrite their titles, which
        overwrites what ``/proc/PID/environ`` shows.
        """
        import psutil

        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if os.getsid(proc.pid) in self.sessions:
                    found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
            except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
                continue
        return found

    def __enter__(self) -> AirflowStack:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def running(settings: StackSettings) -> Iterator[AirflowStack]:
    with AirflowStack(settings) as stack:
        yield stack
