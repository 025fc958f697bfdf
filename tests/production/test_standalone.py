"""``airflow-k8s-ml standalone``: one command brings up the UI over the embedded cluster and S3, prints the
URL and the login (kept across starts), and SIGTERM stops the whole tree."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from airflow_k8s_ml.testbed.airflow_rest import AirflowRest
from airflow_k8s_ml.testbed.airflow_stack import AirflowStack, StackSettings, free_port, port_is_free

CLI = str(Path(sys.executable).parent / "airflow-k8s-ml")


def _start(home: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [CLI, "standalone", "--port", str(port), "--home", str(home)],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ},
    )
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 240
    for line in proc.stdout:
        seen.append(line)
        found = re.search(r"Airflow UI\s+(\S+)\s+login: admin / (\S+)", line)
        if found:
            assert found.group(1) == f"http://127.0.0.1:{port}"
            return proc, found.group(2)
        assert time.monotonic() < deadline, "".join(seen)
    raise AssertionError("standalone exited before it was ready:\n" + "".join(seen))


def _cwd_or_env_names(proc: psutil.Process, home: Path) -> bool:
    """A process started by this standalone: its command line or open files name the home."""
    try:
        text = " ".join(proc.cmdline()) + " ".join(f.path for f in proc.open_files())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return str(home) in text


def test_standalone_prints_the_login_every_time_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    proc, password = _start(tmp_path, port)
    try:
        rest = AirflowRest(f"http://127.0.0.1:{port}", "admin", password)
        assert rest.wait_dag("nightly_finetune", timeout=120)["dag_id"] == "nightly_finetune"
        rest.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    assert port_is_free(port)
    stray = [p.pid for p in psutil.process_iter() if _cwd_or_env_names(p, tmp_path)]
    assert stray == []
    # the next start shows the same login: the password is kept in the Airflow home (mode 0600)
    stack = AirflowStack(StackSettings(home=tmp_path / "airflow-home", dags_folder=tmp_path))
    assert stack.password == password
    assert (tmp_path / "airflow-home" / "passwords.json").stat().st_mode & 0o777 == 0o600


def test_standalone_refuses_a_busy_port(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [CLI, "standalone", "--port", str(port), "--home", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in result.stderr
