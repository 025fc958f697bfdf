"""A TFJob replica that proves its topology from ``TF_CONFIG``, without TensorFlow.

Why: what a TFJob gives TensorFlow is ``TF_CONFIG`` (the cluster spec: every replica's ``host:port`` by
type, and this process's task), and ``tf.distribute`` only works when it is right: the task is in the
cluster, its address is where this replica listens, and the others reach it. This entrypoint checks exactly
that with plain sockets, so the TFJob path is tested end to end on any machine:

- the coordinator (the Chief, else the Master, else Worker 0) listens on its own cluster-spec port and
  waits until every Worker (but itself) has said hello, then exits 0;
- every other Worker dials the coordinator's address from ``TF_CONFIG`` (retrying while it starts), says
  ``hello <type> <index>``, reads the coordinator's ``ok``, says so and only then hangs up (the coordinator
  waits for that, so no worker's line can be cut by the job ending first), and exits 0;
- a parameter server (PS) listens on its port and serves until it is stopped, as TensorFlow's servers do
  (the TFJob's ``cleanPodPolicy: Running`` stops it once the job succeeded);
- an Evaluator prints the topology and exits 0.

Each says what it found (``task worker 1 of 2; coordinator chief 0 at 127.42.0.7:2222``), flushed, so the
operator's log relay shows it per replica. A malformed ``TF_CONFIG`` or a task missing from the cluster spec
exits 2 with the reason as the last line. ``python -m airflow_k8s_ml.workloads.tf_topology [--timeout S]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Topology", "coordinator", "main", "parse_tf_config"]

Topology = dict[str, Any]


class TopologyError(ValueError):
    """``TF_CONFIG`` is missing, malformed, or does not place this task in its cluster."""


def parse_tf_config(raw: str | None) -> Topology:
    """``TF_CONFIG`` checked: a ``cluster`` of ``type -> [host:port]`` and a ``task`` that is one of them."""
    if not raw:
        raise TopologyError("TF_CONFIG is not set: not a distributed TFJob replica")
    try:
        config = json.loads(raw)
    except ValueError as exc:
        raise TopologyError(f"TF_CONFIG is not JSON: {exc}") from None
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise TopologyError("TF_CONFIG needs a 'cluster' and a 'task' object")
    rtype, index = task.get("type"), task.get("index")
    members = cluster.get(rtype)
    if not isinstance(index, int) or not isinstance(members, list) or not 0 <= index < len(members):
        raise TopologyError(f"task {rtype} {index} is not in the cluster spec {sorted(cluster)}")
    for hosts in cluster.values():
        for endpoint in hosts:
            host, _, port = str(endpoint).rpartition(":")
            if not host or not port.isdigit():
                raise TopologyError(f"endpoint {endpoint!r} is not host:port")
    return {"cluster": cluster, "type": rtype, "index": index}


def coordinator(cluster: Mapping[str, Sequence[str]]) -> tuple[str, int]:
    """Who the others report to: the Chief, else the Master, else Worker 0 (the training operator's master
    role)."""
    for rtype in ("chief", "master", "worker"):
        if cluster.get(rtype):
            return rtype, 0
    raise TopologyError("the cluster spec has no chief, master or worker")


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


def _say(text: str) -> None:
    print(text, flush=True)


def _coordinate(port: int, expected: set[str], timeout: float) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("", port))  # the pod's own address (each pod has its own IP)
        server.listen(64)
        server.settimeout(timeout)
        _say(f"listening on port {port} for {len(expected)} worker(s)")
        while expected:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                raise TopologyError(f"timed out waiting for {sorted(expected)}") from None
            with conn:
                hello = conn.recv(256).decode().strip()
                name = hello.removeprefix("hello ")
                if name in expected:
                    conn.sendall(b"ok\n")
                    # the worker closes after saying it reported: its line is written before the Chief
                    # can end the job (cleanPodPolicy Running stops a worker still running at the end)
                    conn.settimeout(timeout)
                    with contextlib.suppress(OSError):
                        conn.recv(16)
                    expected.discard(name)
                    _say(f"hello from {name}")


def _report(address: tuple[str, int], name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(address, timeout=5) as conn:
                conn.sendall(f"hello {name}\n".encode())
                if conn.recv(16).decode().strip() == "ok":
                    _say(f"reported to the coordinator at {address[0]}:{address[1]}")
                    return
        except OSError:
            pass  # not listening yet: it may start after us, as on a cluster
        if time.monotonic() > deadline:
            raise TopologyError(f"could not reach the coordinator at {address[0]}:{address[1]}")
        time.sleep(0.2)


def _serve(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("", port))
        server.listen(64)
        _say(f"parameter server listening on port {port}")
        while True:
            conn, _ = server.accept()
            conn.close()


def run(topology: Topology, timeout: float) -> None:
    cluster, rtype, index = topology["cluster"], topology["type"], topology["index"]
    lead_type, lead_index = coordinator(cluster)
    lead = cluster[lead_type][lead_index]
    sizes = ", ".join(f"{len(hosts)} {name}" for name, hosts in sorted(cluster.items()))
    _say(f"task {rtype} {index}; cluster {sizes}; coordinator {lead_type} {lead_index} at {lead}")
    own_port = _split(cluster[rtype][index])[1]
    if (rtype, index) == (lead_type, lead_index):
        workers = {f"worker {i}" for i in range(len(cluster.get("worker", [])))} - {f"{rtype} {index}"}
        _coordinate(own_port, workers, timeout)
        _say("topology complete")
    elif rtype == "worker":
        _report(_split(lead), f"{rtype} {index}", timeout)
    elif rtype == "ps":
        _serve(own_port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the others")
    options = parser.parse_args(argv)
    try:
        run(parse_tf_config(os.environ.get("TF_CONFIG")), options.timeout)
    except TopologyError as exc:
        _say(f"topology error: {exc}")
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover - the container entrypoint
    sys.exit(main())
