"""Server memory under many watchers of a large object: RSS of the API server process (started as
``local up`` starts it) before, with N watchers that never read while the object changes, and after
they closed. ``python bench/watch_memory.py [--watchers 200] [--size-mib 1]``; prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import tempfile
import time
from pathlib import Path

from kubernetes import client, config

from airflow_k8s_ml.testbed.local_cluster.daemon import (
    ServeOptions,
    pid_of,
    start_background,
    stop_background,
)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _unread_watch(host: str, port: int, token: str, ca: Path) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(ca))
    sock = context.wrap_socket(socket.create_connection((host, port)), server_hostname=host)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel buffers little for us
    path = "/api/v1/namespaces/default/configmaps?watch=true"
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return sock


def watch_memory(watchers: int = 200, size: int = 1024 * 1024, updates: int = 5) -> dict[str, float]:
    """{"baseline", "watching", "closed"}: server RSS in MiB at each stage."""
    with tempfile.TemporaryDirectory() as tmp:
        options = ServeOptions(state_dir=Path(tmp) / "state")
        kubeconfig = start_background(options)
        sockets: list[ssl.SSLSocket] = []
        try:
            api = config.new_client_from_config(str(kubeconfig))
            core = client.CoreV1Api(api)
            pid = pid_of(options.state_dir)
            assert pid is not None
            value = "x" * (size - 4096)  # the data limit is 1 MiB; the rest is metadata and encoding
            core.create_namespaced_config_map("default", {"metadata": {"name": "big"}, "data": {"k": value}})
            figures = {"baseline": rss_mib(pid)}
            host, port = api.configuration.host.removeprefix("https://").rsplit(":", 1)
            token = (options.state_dir / "token").read_text()
            for _ in range(watchers):
                sockets.append(_unread_watch(host, int(port), token, options.state_dir / "ca.crt"))
            for i in range(updates):
                core.patch_namespaced_config_map("big", "default", {"data": {"k": str(i % 10) * len(value)}})
            core.list_namespaced_config_map("default")
            figures["watching"] = rss_mib(pid)
            for sock in sockets:
                sock.close()
            sockets.clear()
            time.sleep(1.0)  # let the server notice the closed connections
            core.list_namespaced_config_map("default")
            figures["closed"] = rss_mib(pid)
            api.close()
            return figures
        finally:
            for sock in sockets:
                sock.close()
            stop_background(options.state_dir)


def report(watchers: int, size_mib: float) -> str:
    f = watch_memory(watchers, int(size_mib * 1024 * 1024))
    return (
        f"server RSS, {watchers} unread watches on a {size_mib:g} MiB ConfigMap changed 5 times: "
        f"{f['baseline']:.0f} MiB before, {f['watching']:.0f} MiB watching "
        f"(+{f['watching'] - f['baseline']:.0f}), {f['closed']:.0f} MiB after they closed"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--watchers", type=int, default=200)
    parser.add_argument("--size-mib", type=float, default=1.0)
    args = parser.parse_args()
    print(report(args.watchers, args.size_mib))


if __name__ == "__main__":
    main()
