"""Helpers for Deployment/Service/HPA tests: an echo server pod template, polling, kubectl, admin calls."""

from __future__ import annotations

import os
import ssl
import subprocess
from typing import Any

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

# Answers every GET/POST with JSON describing the request and the pod; 500 on /broken (a readiness probe
# pointed there never passes). Binds the pod IP from the downward API, so replicas share port 8080.
ECHO_SERVER = (
    "import http.server, json, os\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def reply(self):\n"
    "        n = int(self.headers.get('Content-Length') or 0)\n"
    "        body = self.rfile.read(n).decode() if n else ''\n"
    "        code = 500 if self.path.startswith('/broken') else 200\n"
    "        out = json.dumps({'pod': os.environ['POD_NAME'], 'ip': os.environ['POD_IP'],\n"
    "            'method': self.command,\n"
    "            'path': self.path, 'body': body, 'auth': self.headers.get('Authorization'),\n"
    "            'x_test': self.headers.get('X-Test'), 'version': os.environ.get('VERSION', '')}).encode()\n"
    "        self.send_response(code); self.send_header('Content-Type', 'application/json')\n"
    "        self.send_header('Content-Length', str(len(out))); self.end_headers(); self.wfile.write(out)\n"
    "    do_GET = do_POST = reply\n"
    "    def log_message(self, *a): pass\n"
    "http.server.ThreadingHTTPServer((os.environ['POD_IP'], 8080), H).serve_forever()\n"
)


def echo_container(version: str = "v1", probe_path: str = "/") -> dict[str, Any]:
    return {
        "name": "web",
        "image": "python:3.11",
        "command": ["python", "-c", ECHO_SERVER],
        "env": [
            {"name": "VERSION", "value": version},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {
            "httpGet": {"path": probe_path, "port": "http"},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    }


def deployment(name: str, container: dict[str, Any], replicas: int, **spec: Any) -> dict[str, Any]:
    """A Deployment of ``replicas`` pods of one container, selected by ``app: <name>``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]},
            },
            **spec,
        },
    }


def echo_deployment(name: str, replicas: int = 2, version: str = "v1", **spec: Any) -> dict[str, Any]:
    return deployment(name, echo_container(version), replicas, **spec)


def sleeper_deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    """Pods without a probe (ready once running): for HPA tests that only need ready replicas."""
    command = ["python", "-c", "import time; time.sleep(600)"]
    sleeper = {"name": "main", "image": "python:3.11", "command": command}
    return deployment(name, sleeper, replicas)


def condition(obj: Any, type_: str) -> Any:
    return next((c for c in (obj.status.conditions or []) if c.type == type_), None)


def kubectl(cluster: ClusterThread, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
    return subprocess.run(
        ["kubectl", *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def raw_request(
    cluster: ClusterThread,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """An HTTPS request with the cluster's token; returns (status, headers, body) for any status code."""
    import urllib.error

    ctx = ssl.create_default_context(cafile=str(cluster.kubeconfig_path.parent / "ca.crt"))
    request = urllib.request.Request(
        f"{cluster.url}{path}",
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {cluster.token}", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=20) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def events(core: Any, namespace: str, name: str) -> list[tuple[str, str, str]]:
    found = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.type, e.reason, e.message) for e in found]
