"""Pod IPs: each pod listens on its own loopback address, so two pods can use the same port;
readiness probes run against the pod IP and flip the Ready condition."""

from __future__ import annotations

import urllib.request

from kubernetes import client

from .pod_helpers import condition, container_status, pod_body, wait_pod, watch_pod

_SERVER = (
    "import http.server, os, sys, time\n"
    "time.sleep(float(sys.argv[1]))\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = os.environ['WHO'].encode(); self.send_response(200); self.end_headers();"
    " self.wfile.write(body)\n"
    "    def log_message(self, *a): pass\n"
    "http.server.HTTPServer((sys.argv[2], 18080), H).serve_forever()\n"
)


def _web_pod(name: str, delay: float, bind: str) -> dict:
    env = [
        {"name": "WHO", "value": name},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    probe = {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1, "failureThreshold": 30}
    return pod_body(
        name,
        command=["python", "-c", _SERVER, str(delay), bind],
        restart="Always",
        terminationGracePeriodSeconds=1,
        container={"env": env, "ports": [{"name": "http", "containerPort": 18080}], "readinessProbe": probe},
    )


def test_two_pods_listen_on_the_same_port_and_become_ready(core: client.CoreV1Api, namespace: str) -> None:
    # "wildcard" binds 0.0.0.0 (rewritten to the pod IP); "explicit" binds $(POD_IP) from the downward API.
    created = core.create_namespaced_pod(namespace, _web_pod("wildcard", 0.5, "0.0.0.0"))
    core.create_namespaced_pod(namespace, _web_pod("explicit", 0.0, "$(POD_IP)"))

    seen = watch_pod(
        core,
        namespace,
        "wildcard",
        lambda p: condition(p, "Ready") is not None and condition(p, "Ready").status == "True",
        since=created.metadata.resource_version,
    )
    running_unready = [
        p for p in seen if p.status.phase == "Running" and condition(p, "Ready").status == "False"
    ]
    assert running_unready, "the readiness probe should keep the pod unready until the server answers"
    assert condition(running_unready[0], "Ready").message == "containers with unready status: [main]"
    assert container_status(seen[-1]).ready is True
    explicit = wait_pod(core, namespace, "explicit", lambda p: condition(p, "Ready").status == "True")

    ips = {seen[-1].status.pod_ip, explicit.status.pod_ip}
    assert len(ips) == 2
    answers = {urllib.request.urlopen(f"http://{ip}:18080/", timeout=5).read().decode() for ip in ips}
    assert answers == {"wildcard", "explicit"}
