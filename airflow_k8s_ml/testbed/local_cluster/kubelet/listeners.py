"""Who answers on a pod's ``IP:port``: the TCP listener a connection would reach, and whether it belongs
to the pod's processes (Linux ``/proc``: ``/proc/net/tcp{,6}`` maps listeners to socket inodes,
``/proc/PID/fd`` maps processes to the sockets they hold).

Why: pods share the host's network stack (each has its own loopback IP), so a host process listening on
the wildcard address ``0.0.0.0:PORT`` (or a C++ server that binds ``[::]``) also answers on every pod's
``127.B.x.y:PORT``, and the pod's own bind then fails. A probe that merely connects would call such a
pod Ready through someone else's socket. Blocking reads of ``/proc``: call these from a thread.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    address: str  # as bound: "0.0.0.0", "::", "127.42.0.7"
    port: int
    inode: int

    @property
    def endpoint(self) -> str:
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"


def listeners(port: int) -> list[Listener]:
    """Every TCP socket listening on ``port`` (IPv4 and IPv6 tables)."""
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address_hex, _, port_hex = fields[1].partition(":")
            if int(port_hex, 16) != port or len(address_hex) != width:
                continue
            found.append(Listener(_address(address_hex), port, int(fields[9])))
    return found


def reached(ip: str, port: int) -> Listener | None:
    """The listener a connection to ``ip:port`` reaches: one bound to ``ip`` itself, else a wildcard."""
    candidates = listeners(port)
    for listener in candidates:
        if listener.address == ip:
            return listener
    for listener in candidates:
        if listener.address in ("0.0.0.0", "::"):
            return listener
    return None


def socket_inodes(pids: Iterable[int]) -> set[int]:
    """The socket inodes the processes hold open."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(fd.path)
                    if target.startswith("socket:["):
                        inodes.add(int(target[8:-1]))
    return inodes


def holder(inode: int) -> tuple[int, str] | None:
    """(pid, command name) of a process holding the socket, for the message (None if not visible)."""
    wanted = f"socket:[{inode}]"
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return None
    for entry in entries:
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) == wanted:
                        name = Path(f"/proc/{entry.name}/comm").read_text().strip()
                        return int(entry.name), name
    return None


def foreign_listener(ip: str, port: int, pod_pids: Iterable[int]) -> str | None:
    """Why ``ip:port`` is not the pod's own listener (None when it is, or nothing listens there)."""
    listener = reached(ip, port)
    if listener is None or listener.inode in socket_inodes(pod_pids):
        return None
    return describe(listener)


def describe(listener: Listener) -> str:
    who = holder(listener.inode)
    by = f"pid {who[0]} ({who[1]})" if who is not None else "a process the kubelet cannot see"
    return f"port {listener.port} is held by {by}, not by this pod, listening on {listener.endpoint}"


def _address(hex_address: str) -> str:
    """``/proc/net/tcp`` addresses are the raw in-memory words: 32-bit little-endian groups."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(words)
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped if mapped is not None else address)
