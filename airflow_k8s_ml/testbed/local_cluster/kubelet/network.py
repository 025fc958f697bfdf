"""Pod networking on one machine: a distinct loopback address per pod, so ports never clash.

Linux routes all of 127.0.0.0/8 to the loopback interface, so every pod gets its own ``127.B.x.y``
(B random per cluster) and
two pods (two replicas of one Deployment) can both listen on port 8080. Processes that bind the wildcard
address (``0.0.0.0``/``""``, what most servers do) would still clash, so Python processes get a tiny
``sitecustomize`` (directory ``pyshim``, put first on ``PYTHONPATH``) that rewrites wildcard IPv4 binds to
the pod IP. ``POD_IP`` itself is only set through the downward API, as on a real cluster.
"""

from __future__ import annotations

import ipaddress
import random
import socket
from pathlib import Path
from urllib.parse import urlparse

HOST_IP = "127.0.0.1"
SHIM_DIR = Path(__file__).resolve().parent / "pyshim"
BIND_ENV = "LOCAL_CLUSTER_BIND_ADDRESS"
_FIRST = int(ipaddress.IPv4Address("127.42.0.1"))
_LAST = int(ipaddress.IPv4Address("127.42.255.254"))


def loopback_range_usable() -> bool:
    """Linux answers on all of 127.0.0.0/8; macOS only on 127.0.0.1 unless aliases were added."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind((str(ipaddress.IPv4Address(_FIRST)), 0))
    except OSError:
        return False
    finally:
        probe.close()
    return True


class IpAllocator:
    """Hands out pod IPs round-robin, so an address is reused only after the whole range went by
    (a client still holding an old pod's IP does not silently reach a new pod). Where the loopback
    range is not usable every pod gets the host IP (ports may then clash, as with hostNetwork)."""

    def __init__(self, usable: bool = True, block: int | None = None) -> None:
        # Each cluster takes its own random 127.<block>.0.0/16, so two clusters on one machine (a test
        # session's shared and fresh clusters, the demo beside `local up`) do not hand out the same pod IPs.
        self._block = block if block is not None else random.randint(42, 250)
        self._first = _FIRST + (self._block - 42) * 65536
        self._last = _LAST + (self._block - 42) * 65536
        self._next = self._first
        self._in_use: dict[str, str] = {}
        self._usable = usable

    def allocate(self, uid: str) -> str:
        if not self._usable:
            return HOST_IP
        if uid in self._in_use:
            return self._in_use[uid]
        taken = set(self._in_use.values())
        for _ in range(self._last - self._first + 1):
            candidate = self._next
            self._next = self._first if candidate >= self._last else candidate + 1
            ip = str(ipaddress.IPv4Address(candidate))
            if ip.endswith((".0", ".255")) or ip in taken:
                continue
            self._in_use[uid] = ip
            return ip
        raise RuntimeError(f"no free pod IP in 127.{self._block}.0.0/16")

    def release(self, uid: str) -> None:
        self._in_use.pop(uid, None)


def api_server_env(url: str) -> dict[str, str]:
    """The variables every container gets so in-cluster clients find the API server."""
    parsed = urlparse(url)
    host, port = parsed.hostname or HOST_IP, str(parsed.port or 443)
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": port,
        f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }


def bind_shim_env(pod_ip: str, python_path: str | None) -> dict[str, str]:
    """PYTHONPATH with the shim first (keeping the pod's own entries) and the address to bind."""
    paths = [str(SHIM_DIR)] + ([python_path] if python_path else [])
    return {"PYTHONPATH": ":".join(paths), BIND_ENV: pod_ip}
