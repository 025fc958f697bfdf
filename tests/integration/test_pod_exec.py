"""Pod exec and port-forward from the Python clients, over the websocket channel protocols: the
``kubernetes`` client's ``stream`` (v5/v4.channel.k8s.io) and ``portforward``, and ``kubernetes_asyncio``'s
``WsApiClient`` (v4.channel.k8s.io). What another provider's code (the cncf XCom sidecar) relies on."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kubernetes.stream import portforward, stream

SLEEPER = "trap 'exit 0' TERM INT; while true; do sleep 1; done"


def _pod(core: Any, namespace: str, name: str, command: list[str], wait: bool = True) -> None:
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "alpine:3.20",
                        "command": command,
                        "env": [{"name": "GREETING", "value": "hello"}],
                        "volumeMounts": [{"name": "xcom", "mountPath": "/airflow/xcom"}],
                    }
                ],
                "volumes": [{"name": "xcom", "emptyDir": {}}],
            },
        },
    )
    deadline = time.monotonic() + 60
    while wait and (phase := core.read_namespaced_pod(name, namespace).status.phase) != "Running":
        assert time.monotonic() < deadline, f"pod {name} not Running within 60 s (phase {phase})"
        time.sleep(0.2)


def test_exec_output_and_exit_code(core: Any, namespace: str) -> None:
    _pod(core, namespace, "box", ["sh", "-c", SLEEPER])
    script = "echo $GREETING; echo '{\"a\": 1}' > /airflow/xcom/return.json; cat /airflow/xcom/return.json"
    out = stream(
        core.connect_get_namespaced_pod_exec,
        "box",
        namespace,
        command=["sh", "-c", script],
        stdin=False,
        stdout=True,
        stderr=True,
        tty=False,
    )
    assert out == 'hello\n{"a": 1}\n'
    resp = stream(
        core.connect_get_namespaced_pod_exec,
        "box",
        namespace,
        command=["sh", "-c", "echo bad >&2; exit 7"],
        stdin=False,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    resp.run_forever(timeout=30)
    assert resp.read_stderr() == "bad\n"
    assert resp.returncode == 7


def test_exec_shell_on_stdin_stops_the_sidecar_as_the_cncf_provider_does(core: Any, namespace: str) -> None:
    """The cncf provider's ``extract_xcom_kill``: ``/bin/sh`` with stdin, ``kill -2 $(pgrep -u $(id -u)
    -f 'sh')``. ``pgrep`` sees the container's processes only, so the sidecar's trap ends it with 0."""
    _pod(core, namespace, "sidecar", ["sh", "-c", SLEEPER])
    resp = stream(
        core.connect_get_namespaced_pod_exec,
        "sidecar",
        namespace,
        command=["/bin/sh"],
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    resp.write_stdin("pgrep -f 'sh' | wc -l\n")
    deadline = time.monotonic() + 30
    while not resp.peek_stdout():
        assert time.monotonic() < deadline, "no answer from pgrep within 30 s"
        resp.update(timeout=1)
    assert resp.read_stdout().strip() == "2"  # the container's shell and this one: nothing of the host
    resp.write_stdin("kill -2 $(pgrep -u $(id -u) -f 'sh')\n")
    while resp.is_open():
        assert time.monotonic() < deadline, "the exec'd shell did not end within 30 s"
        resp.update(timeout=1)
    assert resp.read_stderr() == ""
    while (pod := core.read_namespaced_pod("sidecar", namespace)).status.phase == "Running":
        assert time.monotonic() < deadline, "the sidecar did not stop within 30 s"
        time.sleep(0.2)
    assert pod.status.phase == "Succeeded"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0


def test_exec_errors_before_the_upgrade(core: Any, namespace: str) -> None:
    _pod(core, namespace, "done", ["sh", "-c", "exit 0"], wait=False)
    deadline = time.monotonic() + 30
    while core.read_namespaced_pod("done", namespace).status.phase != "Succeeded":
        assert time.monotonic() < deadline, "pod did not succeed within 30 s"
        time.sleep(0.2)
    # The client fails the handshake with the server's Status in its message (this client version then
    # trips over its own error handling: the Status is read from the exception chain).
    with pytest.raises(Exception) as caught:
        stream(
            core.connect_get_namespaced_pod_exec,
            "done",
            namespace,
            command=["true"],
            stdin=False,
            stdout=True,
            stderr=True,
            tty=False,
        )
    chain, error = [], caught.value
    while error is not None:
        chain.append(str(getattr(error, "reason", "")) + str(error))
        error = error.__context__
    assert any("Handshake status 400" in e and "current phase is Succeeded" in e for e in chain), chain


def test_exec_from_kubernetes_asyncio(kubeconfig: str, namespace: str, core: Any) -> None:
    """``kubernetes_asyncio``'s WsApiClient asks for v4.channel.k8s.io and reads the Status on channel 3."""
    _pod(core, namespace, "abox", ["sh", "-c", SLEEPER])

    async def run() -> tuple[str, int]:
        from kubernetes_asyncio import client as aclient
        from kubernetes_asyncio import config as aconfig
        from kubernetes_asyncio.stream import WsApiClient

        configuration = aclient.Configuration()
        await aconfig.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        async with WsApiClient(configuration=configuration) as ws_api:
            api = aclient.CoreV1Api(api_client=ws_api)
            out = await api.connect_get_namespaced_pod_exec(
                "abox", namespace, command=["sh", "-c", "echo $GREETING"], stdout=True, stderr=True
            )
            ws = await api.connect_get_namespaced_pod_exec(
                "abox",
                namespace,
                command=["sh", "-c", "exit 4"],
                stdout=True,
                stderr=True,
                _preload_content=False,
            )
            code = -1
            async with ws as connection:
                async for message in connection:
                    data = message.data if isinstance(message.data, bytes) else message.data.encode()
                    if data[:1] == b"\x03":
                        code = WsApiClient.parse_error_data(data[1:])
            return out, code

    out, code = asyncio.run(run())
    assert (out, code) == ("hello\n", 4)


def test_port_forward_from_the_python_client(core: Any, namespace: str) -> None:
    code = (
        "import http.server as h\n"
        "class H(h.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'from the pod')\n"
        "h.HTTPServer(('', 8080), H).serve_forever()\n"
    )
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "python:3.11-slim",
                        "command": ["python", "-c", code],
                        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                    }
                ]
            },
        },
    )
    deadline = time.monotonic() + 60
    while not _ready(core.read_namespaced_pod("web", namespace)):
        assert time.monotonic() < deadline, "pod web not Ready within 60 s"
        time.sleep(0.2)
    forward = portforward(core.connect_get_namespaced_pod_portforward, "web", namespace, ports="8080")
    sock = forward.socket(8080)
    sock.setblocking(True)
    sock.settimeout(30)
    sock.sendall(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")
    reply = b""
    while chunk := sock.recv(4096):
        reply += chunk
    assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(b"from the pod")
    assert forward.error(8080) is None

    refused = portforward(core.connect_get_namespaced_pod_portforward, "web", namespace, ports="9999")
    closed = refused.socket(9999)
    closed.setblocking(True)
    closed.settimeout(30)
    try:
        assert closed.recv(16) == b""
    except (TimeoutError, ConnectionResetError):
        pass
    assert "error forwarding port 9999 to pod web" in (refused.error(9999) or "")
    assert "connection refused" in (refused.error(9999) or "")


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_what_an_exec_starts_ends_with_the_pod(core: Any, namespace: str) -> None:
    """A daemon started by exec (``setsid``, parent exits) lives in the container, and goes with the pod."""
    _pod(core, namespace, "host", ["sh", "-c", SLEEPER])
    out = stream(
        core.connect_get_namespaced_pod_exec,
        "host",
        namespace,
        command=["sh", "-c", "setsid sleep 4321 > /dev/null 2>&1 & echo $!"],
        stdin=False,
        stdout=True,
        stderr=True,
        tty=False,
    )
    pid = int(out.strip())
    assert _alive(pid), "the exec'd daemon should outlive the exec session, as in a container"
    core.delete_namespaced_pod("host", namespace, grace_period_seconds=1)
    deadline = time.monotonic() + 60
    while _alive(pid):
        assert time.monotonic() < deadline, f"process {pid} started by exec outlived its pod by 60 s"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
