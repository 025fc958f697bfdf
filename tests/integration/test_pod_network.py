"""Pod IPs: each pod listens on its own loopback address, so two pods can use the same port;
readiness probes run against the pod IP and flip the Ready condition, but only for the pod's own
listener: a host process holding the port gets a PortInUse event and never makes the pod Ready."""

from __future__ import annotations

import http.server
import os
import threading
import urllib.request

from kubernetes import client

from ..cluster_fixtures import wait_for
from .pod_helpers import condition, container_status, events_for, pod_body, wait_pod, watch_pod

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


class _Host(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"host")

    def log_message(self, *args: object) -> None:
        pass


def test_a_port_taken_by_a_host_process_gives_an_event_and_no_false_ready(
    core: client.CoreV1Api, namespace: str
) -> None:
    # A host web server on the wildcard address answers on every pod IP at its port.
    host = http.server.HTTPServer(("0.0.0.0", 0), _Host)
    port = host.server_address[1]
    threading.Thread(target=host.serve_forever, daemon=True).start()
    try:
        probe = {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1, "failureThreshold": 1}
        body = pod_body(
            "shadowed",
            command=["sleep", "30"],
            restart="Always",
            terminationGracePeriodSeconds=1,
            container={"ports": [{"containerPort": port}], "readinessProbe": probe},
        )
        created = core.create_namespaced_pod(namespace, body)

        def refused(events: list[client.CoreV1Event]) -> bool:
            unhealthy = [e for e in events if e.reason == "Unhealthy"]
            return any(e.reason == "PortInUse" for e in events) and sum(e.count for e in unhealthy) >= 3

        events = wait_for(lambda: events_for(core, namespace, "shadowed"), refused, what="port events")
        pod = core.read_namespaced_pod("shadowed", namespace)
        seen = watch_pod(
            core,
            namespace,
            "shadowed",
            lambda p: p.metadata.resource_version == pod.metadata.resource_version,
            since=created.metadata.resource_version,
        )
    finally:
        host.shutdown()
        host.server_close()

    in_use = next(e for e in events if e.reason == "PortInUse")
    assert in_use.type == "Warning"
    assert f"declares port {port}/TCP, which is already in use" in in_use.message
    assert f"pid {os.getpid()}" in in_use.message and f"0.0.0.0:{port}" in in_use.message
    unhealthy = next(e for e in events if e.reason == "Unhealthy")
    assert f"port {port} is held by pid {os.getpid()}" in unhealthy.message
    assert unhealthy.message.startswith("Readiness probe failed: ")
    assert all(condition(p, "Ready") is None or condition(p, "Ready").status != "True" for p in seen)
    assert container_status(seen[-1]).ready is False
