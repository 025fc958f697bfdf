"""kubectl's first hour on the local cluster, each command as a user types it: ``create`` of built-in kinds
(kubectl sends protobuf for them), ``exec`` (a command, ``-i`` with stdin, ``-it`` with a terminal),
``auth can-i``, and ``port-forward`` (SPDY tunnelled in a websocket)."""

from __future__ import annotations

import base64
import json
import os
import pty
import select
import shutil
import subprocess
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from .test_kubectl import kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

SLEEPER = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: main
    image: alpine:3.20
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    env: [{{name: GREETING, value: hello}}]
    volumeMounts: [{{name: scratch, mountPath: /data}}]
  volumes: [{{name: scratch, emptyDir: {{}}}}]
"""


def _running_pod(cluster: ClusterThread, tmp_path: Path, namespace: str, name: str = "box") -> str:
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(textwrap.dedent(SLEEPER).format(name=name))
    kubectl(cluster, tmp_path, "apply", "-n", namespace, "-f", str(manifest))
    kubectl(
        cluster, tmp_path, "wait", "-n", namespace, "--for=condition=Ready", f"pod/{name}", "--timeout=60s"
    )
    return name


def test_create_builtin_kinds_as_typed(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    """``kubectl create`` sends protobuf for built-in kinds and never falls back to JSON on a 415: each
    object arrives with what the user typed (replicas, command, literals)."""
    ns = f"{namespace}-made"
    created = [
        kubectl(cluster, tmp_path, "create", "namespace", ns).stdout.strip(),
        kubectl(
            cluster,
            tmp_path,
            "create",
            "deployment",
            "web",
            "-n",
            ns,
            "--image=python:3.11-slim",
            "--replicas=2",
            "--",
            "python",
            "-m",
            "http.server",
            "8080",
        ).stdout.strip(),
        kubectl(
            cluster,
            tmp_path,
            "create",
            "job",
            "pi",
            "-n",
            ns,
            "--image=python:3.11-slim",
            "--",
            "python",
            "-c",
            "print(314)",
        ).stdout.strip(),
        kubectl(
            cluster,
            tmp_path,
            "create",
            "secret",
            "generic",
            "creds",
            "-n",
            ns,
            "--from-literal=user=admin",
            "--from-literal=password=s3cret",
        ).stdout.strip(),
        kubectl(
            cluster, tmp_path, "create", "configmap", "settings", "-n", ns, "--from-literal=mode=fast"
        ).stdout.strip(),
    ]
    assert created == [
        f"namespace/{ns} created",
        "deployment.apps/web created",
        "job.batch/pi created",
        "secret/creds created",
        "configmap/settings created",
    ]
    deployment = json.loads(kubectl(cluster, tmp_path, "get", "-n", ns, "deploy/web", "-o", "json").stdout)
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "http.server", "8080"]
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"  # defaulted, as for a JSON body
    secret = json.loads(kubectl(cluster, tmp_path, "get", "-n", ns, "secret/creds", "-o", "json").stdout)
    assert base64.b64decode(secret["data"]["password"]) == b"s3cret"
    mode = kubectl(cluster, tmp_path, "get", "-n", ns, "configmap/settings", "-o", "jsonpath={.data.mode}")
    assert mode.stdout == "fast"
    kubectl(cluster, tmp_path, "wait", "-n", ns, "--for=condition=complete", "job/pi", "--timeout=60s")
    assert kubectl(cluster, tmp_path, "logs", "-n", ns, "job/pi").stdout.strip() == "314"
    kubectl(cluster, tmp_path, "rollout", "status", "-n", ns, "deploy/web", "--timeout=60s")
    kubectl(cluster, tmp_path, "delete", "namespace", ns, "--wait=false")


def test_exec_runs_a_command_in_the_container(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    """Output, stderr, the container's environment and mount paths, and the exit code, through kubectl's
    websocket exec (v5.channel.k8s.io)."""
    pod = _running_pod(cluster, tmp_path, namespace)
    script = "echo $GREETING; echo oops >&2; echo kept > /data/note; cat /data/note; exit 3"
    result = kubectl(cluster, tmp_path, "exec", "-n", namespace, pod, "--", "sh", "-c", script, check=False)
    assert result.stdout == "hello\nkept\n"
    assert "oops" in result.stderr
    assert result.returncode == 3, result.stderr
    assert "command terminated with exit code 3" in result.stderr


def test_exec_with_stdin(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    """``-i``: kubectl's stdin reaches the command, and its end (v5's CLOSE) ends ``wc``'s input."""
    pod = _running_pod(cluster, tmp_path, namespace)
    env = {"KUBECONFIG": str(cluster.kubeconfig_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [
            "kubectl",
            "exec",
            "-i",
            "-n",
            namespace,
            pod,
            "--",
            "sh",
            "-c",
            'read name; echo "hi $name"; wc -l',
        ],
        input="world\none\ntwo\nthree\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["hi", "world", "3"], result.stdout


def test_exec_interactive_shell_with_a_terminal(
    cluster: ClusterThread, namespace: str, tmp_path: Path
) -> None:
    """``kubectl exec -it pod -- sh`` from a terminal: the shell gets a tty, echoes, and its exit code
    becomes kubectl's."""
    pod = _running_pod(cluster, tmp_path, namespace)
    env = {"KUBECONFIG": str(cluster.kubeconfig_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["kubectl", "exec", "-it", "-n", namespace, pod, "--", "sh"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def read_until(marker: bytes, what: str) -> None:
        nonlocal seen
        deadline = time.monotonic() + 60
        while marker not in seen:
            assert time.monotonic() < deadline, f"no {what} from the shell within 60 s; saw {seen!r}"
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break

    try:
        os.write(master, b"tty; echo product=$((6 * 7))\n")
        read_until(b"product=42", "answer")
        os.write(master, b"exit 5\n")
        assert proc.wait(timeout=60) == 5, seen
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert b"/dev/pts/" in seen  # the command ran on a terminal of its own
    assert b"tty; echo product" in seen  # the terminal echoed what was typed


def test_auth_can_i(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    """The bearer token is cluster-admin (there is no RBAC model): SelfSubjectAccessReview says yes."""
    assert kubectl(cluster, tmp_path, "auth", "can-i", "create", "jobs").stdout.strip() == "yes"
    assert (
        kubectl(cluster, tmp_path, "auth", "can-i", "delete", "pods", "-n", namespace).stdout.strip() == "yes"
    )
    listed = kubectl(cluster, tmp_path, "auth", "can-i", "--list", "-n", namespace).stdout
    assert listed.splitlines()[1].split()[:1] == ["*.*"], listed


def test_port_forward(cluster: ClusterThread, namespace: str, tmp_path: Path) -> None:
    """``kubectl run`` a web server, ``kubectl port-forward pod/web :8080`` (SPDY tunnelled in a websocket),
    and fetch through the local port kubectl picked."""
    env = {"KUBECONFIG": str(cluster.kubeconfig_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = ["run", "web", "-n", namespace, "--image=python:3.11-slim", "--port=8080", "--"]
    kubectl(cluster, tmp_path, *run, "python", "-m", "http.server", "8080")
    kubectl(cluster, tmp_path, "wait", "-n", namespace, "--for=condition=Ready", "pod/web", "--timeout=60s")
    forward = subprocess.Popen(
        ["kubectl", "port-forward", "-n", namespace, "pod/web", ":8080"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert forward.stdout is not None
        ready, _, _ = select.select([forward.stdout], [], [], 60)
        assert ready, "kubectl port-forward printed nothing within 60 s"
        line = forward.stdout.readline()  # "Forwarding from 127.0.0.1:<port> -> 8080"
        assert line.startswith("Forwarding from 127.0.0.1:") and line.rstrip().endswith("-> 8080"), line
        local = int(line.split("127.0.0.1:")[1].split()[0])
        deadline, body = time.monotonic() + 30, b""
        while b"Directory listing" not in body:
            assert time.monotonic() < deadline, f"no answer through the forwarded port within 30 s: {body!r}"
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10).read()
            except OSError:
                time.sleep(0.3)  # the server may still be starting behind a Ready pod (no probe)
    finally:
        forward.terminate()
        forward.wait(timeout=30)
