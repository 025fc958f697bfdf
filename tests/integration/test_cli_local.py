"""``airflow-k8s-ml local up | status | down`` as a user runs them: a background server, a private
kubeconfig, the ``export KUBECONFIG=...`` line, kubectl working against it, and a clean stop."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "airflow_k8s_ml.cli"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def test_local_up_status_down(tmp_path: Path) -> None:
    state = tmp_path / "state"
    up = run("local", "up", "--state-dir", str(state), "--cpu", "4", "--gpus", "1")
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = state / "kubeconfig"
        assert up.stdout.strip() == f"export KUBECONFIG={kubeconfig}"
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600

        status = run("local", "status", "--state-dir", str(state))
        assert status.returncode == 0, status.stderr
        info = json.loads(status.stdout)
        assert info["state"] == "running" and info["version"].startswith("v1.32")

        if shutil.which("kubectl"):
            env = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path), "PATH": os.environ["PATH"]}
            nodes = subprocess.run(
                ["kubectl", "get", "node", "-o", "jsonpath={.items[0].status.capacity}"],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            capacity = json.loads(nodes.stdout)
            assert capacity["cpu"] == "4" and capacity["nvidia.com/gpu"] == "1"
        # A second `up` finds the running server instead of starting another.
        again = run("local", "up", "--state-dir", str(state))
        assert again.returncode == 0 and again.stdout == up.stdout
    finally:
        down = run("local", "down", "--state-dir", str(state))
    assert down.returncode == 0
    assert "stopped" in down.stderr
    assert run("local", "status", "--state-dir", str(state)).returncode == 1


def test_up_refuses_a_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        up = run("local", "up", "--state-dir", str(tmp_path / "s"), "--port", str(port), timeout=60)
    if up.returncode == 0:  # pragma: no cover - only if the OS allowed the shared bind
        run("local", "down", "--state-dir", str(tmp_path / "s"))
        pytest.fail("a second server bound a port that was in use")
    assert "failed to start" in up.stderr and "address already in use" in up.stderr.lower()


def test_down_and_up_keep_the_cluster_and_purge_deletes_it(tmp_path: Path) -> None:
    from kubernetes import client, config

    state = tmp_path / "state"
    assert run("local", "up", "--state-dir", str(state)).returncode == 0
    try:
        core = client.CoreV1Api(config.new_client_from_config(str(state / "kubeconfig")))
        core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"a": "1"}})
        assert run("local", "down", "--state-dir", str(state)).returncode == 0
        assert run("local", "up", "--state-dir", str(state)).returncode == 0
        core = client.CoreV1Api(config.new_client_from_config(str(state / "kubeconfig")))
        assert core.read_namespaced_config_map("kept", "default").data == {"a": "1"}
    finally:
        purged = run("local", "down", "--purge", "--state-dir", str(state))
    assert purged.returncode == 0 and "deleted" in purged.stderr
    assert not state.exists()
    assert run("local", "down", "--purge", "--state-dir", str(tmp_path)).returncode == 1  # not a state dir
    assert tmp_path.exists()
