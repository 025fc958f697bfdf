"""Loaded by every Python process a local-cluster pod starts (this directory is first on PYTHONPATH).

Why: each pod has its own loopback IP, but servers usually bind the wildcard address, so two pods
listening on the same port would clash. Rewriting a wildcard IPv4 bind to the pod IP gives each pod its
own port space, as network namespaces do on a real node. Then the ``sitecustomize`` this one shadows (if
any) is run, so the environment behaves as without the shim.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from typing import Any

_WILDCARDS = ("", "0.0.0.0")


def _install(address: str) -> None:
    original = socket.socket.bind

    def bind(self: socket.socket, addr: Any) -> None:
        if self.family == socket.AF_INET and isinstance(addr, tuple) and addr and addr[0] in _WILDCARDS:
            addr = (address, *addr[1:])
        original(self, addr)

    socket.socket.bind = bind  # type: ignore[method-assign,assignment]


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or os.curdir) == here:
            continue
        candidate = os.path.join(entry or os.curdir, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


_address = os.environ.get("LOCAL_CLUSTER_BIND_ADDRESS")
if _address:
    _install(_address)
_run_shadowed()
