"""PostgreSQL and Redis for the HA Airflow stack: private, loopback-only, started and stopped with it.

Airflow runs several schedulers only on a database with row locks (``SELECT ... FOR UPDATE SKIP LOCKED``),
and the CeleryExecutor needs a broker. Each server here is Debian's own binary, in a data directory of its
own, bound to 127.0.0.1 on a free port, with a password made once and kept in a 0600 file, in a session of
its own so stopping it takes every child. PostgreSQL refuses to run as root: as root its data directory is
given to the ``postgres`` system user (which Debian's package creates) and the server runs as that user.

Durability is not what the stack tests (the faults are Airflow's, never the database's), so PostgreSQL runs
with ``fsync=off`` and Redis keeps nothing on disk (``--save ''``): a loaded 2-core machine spends its time on
Airflow, not on flushes.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["PostgresServer", "RedisServer", "missing_backends"]

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_SYSTEM_USER = "postgres"
DB_USER = "airflow"
DB_NAME = "airflow"


def missing_backends() -> str | None:
    """Why the HA stack cannot run here (what to install), or None when it can."""
    missing = []
    if not (PG_BIN / "postgres").exists() and not shutil.which("postgres"):
        missing.append("PostgreSQL 15 (apt-get install postgresql-15)")
    if not shutil.which("redis-server"):
        missing.append("Redis (apt-get install redis-server)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(PG_SYSTEM_USER)
        except KeyError:
            missing.append("the 'postgres' system user to run PostgreSQL as (apt-get install postgresql)")
    for module, package in (("psycopg2", "psycopg2-binary"), ("airflow.providers.celery", "celery provider")):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"{package} (pip install 'airflow-k8s-ml[local]')")
    return "; ".join(missing) or None


def _secret_file(path: Path, owner: str | None = None) -> str:
    """A password made once, kept in ``path`` with mode 0600 (owned by ``owner`` when given)."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(24))  # hex: safe in a URL without quoting
    if owner is not None:
        entry = pwd.getpwnam(owner)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path.read_text().strip()


def _free_port() -> int:
    from airflow_k8s_ml.testbed.airflow_stack import free_port

    return free_port()


def _stop(proc: subprocess.Popen[bytes] | None, sig: int, grace: float = 20.0) -> None:
    """Signal the server's session and wait; SIGKILL the session if it outlives ``grace``."""
    if proc is None or proc.poll() is not None:
        return
    for signum, wait in ((sig, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class PostgresServer:
    """One PostgreSQL cluster: ``initdb`` once into ``data_dir`` (kept between starts), then ``postgres``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        # PostgreSQL's files must be owned by the user it runs as; as root that is the postgres user,
        # which must reach them: a directory of its own under /tmp (a pytest tmp dir is root's, 0700).
        self.run_as = PG_SYSTEM_USER if os.geteuid() == 0 else None
        self.base = self._base_dir()
        self.data_dir = self.base / "data"

    def _base_dir(self) -> Path:
        link = self.home / "postgres"
        if self.run_as is None:
            link.mkdir(parents=True, exist_ok=True)
            return link
        if link.is_symlink() and link.resolve().is_dir():
            return link.resolve()
        base = Path(tempfile.mkdtemp(prefix="airflow-k8s-ml-pg-"))
        entry = pwd.getpwnam(self.run_as)
        os.chown(base, entry.pw_uid, entry.pw_gid)
        self.home.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(base)
        return base

    @property
    def password(self) -> str:
        return _secret_file(self.base / "password", self.run_as)

    @property
    def url(self) -> str:
        """SQLAlchemy URL (psycopg2, the driver Airflow's docs set up PostgreSQL with)."""
        return f"postgresql+psycopg2://{DB_USER}:{self.password}@127.0.0.1:{self.port}/{DB_NAME}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), user=self.run_as, capture_output=True, text=True, timeout=300, cwd=self.base
        )

    def _initdb(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.password  # noqa: B018 - made (0600, the server's user) before initdb reads it
        result = self._run(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            DB_USER,
            "--auth=scram-sha-256",
            f"--pwfile={self.base / 'password'}",
            "-E",
            "UTF8",
            "--no-sync",
        )
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")

    def start(self, timeout: float = 120.0) -> PostgresServer:
        self._initdb()
        self.port = _free_port()
        self._log = (self.base / "postgres.log").open("ab")
        self.proc = subprocess.Popen(
            [
                str(PG_BIN / "postgres"),
                "-D",
                str(self.data_dir),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={self.base}",
                "-c",
                "max_connections=400",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ],
            user=self.run_as,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.base,
        )
        self._wait_ready(timeout)
        self._create_database()
        return self

    def _connect(self, dbname: str) -> Any:  # a psycopg2 connection (no stubs)
        import psycopg2

        return psycopg2.connect(
            host="127.0.0.1", port=self.port, user=DB_USER, password=self.password, dbname=dbname
        )

    def _wait_ready(self, timeout: float) -> None:
        import psycopg2

        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                self._connect("postgres").close()
                return
            except psycopg2.OperationalError as exc:  # not accepting yet: retried until the deadline
                if time.monotonic() > deadline:
                    raise TimeoutError(f"postgres did not accept on 127.0.0.1:{self.port}: {exc}") from exc
                time.sleep(0.2)

    def _create_database(self) -> None:
        conn = self._connect("postgres")
        conn.autocommit = True
        try:
            cur = conn.cursor()
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,))
            if cur.fetchone() is None:
                cur.execute(f"CREATE DATABASE {DB_NAME}")
        finally:
            conn.close()

    def query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        """Rows of one read on the Airflow database (what a test reads that REST does not show)."""
        conn = self._connect(DB_NAME)
        try:
            cur = conn.cursor()
            cur.execute(sql, params)
            return list(cur.fetchall())
        finally:
            conn.close()

    def log_tail(self, chars: int = 2000) -> str:
        path = self.base / "postgres.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT: disconnect clients, then exit), SIGKILL of the session if it hangs."""
        _stop(self.proc, signal.SIGINT)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def remove(self) -> None:
        """Delete the data directory (outside the home when run as root)."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)
        (self.home / "postgres").unlink(missing_ok=True)


class RedisServer:
    """One Redis on 127.0.0.1, a free port, a password, nothing saved to disk."""

    def __init__(self, home: Path) -> None:
        self.home = home / "redis"
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def password(self) -> str:
        return _secret_file(self.home / "password")

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 60.0) -> RedisServer:
        self.port = _free_port()
        conf = self.home / "redis.conf"  # the password in a 0600 file, not on a command line `ps` shows
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(
                f'bind 127.0.0.1\nport {self.port}\nrequirepass {self.password}\nsave ""\n'
                f"appendonly no\nprotected-mode yes\ndir {self.home}\n"
            )
        self._log = (self.home / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", str(conf)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                redis.Redis(host="127.0.0.1", port=self.port, password=self.password).ping()
                return
            except redis.exceptions.ConnectionError as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis did not answer on 127.0.0.1:{self.port}") from exc
                time.sleep(0.1)

    def stop(self) -> None:
        _stop(self.proc, signal.SIGTERM)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
