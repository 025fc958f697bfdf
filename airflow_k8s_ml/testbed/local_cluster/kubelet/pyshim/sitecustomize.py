"""Loaded by every Python process a local-cluster pod starts (this directory is first on PYTHONPATH).

Why: each pod has its own loopback IP, but servers usually bind the wildcard address, so two pods
listening on the same port would clash. Rewriting a wildcard IPv4 bind to the pod IP gives each pod its
own port space, as network namespaces do on a real node. Then the ``sitecustomize`` this one shadows (if
any) is run, so the environment behaves as without the shim.

torch's ``TCPStore`` (the rendezvous server of ``init_process_group``, on ``MASTER_PORT``) binds the
wildcard from C++, out of reach of ``socket.bind``: once ``torch.distributed`` is imported, a master store
is given a listening socket bound to the pod IP instead (its ``master_listen_fd``). Without that, two
PyTorchJobs on the default port 23456 collide: the second Master fails to bind and restarts, and its
Workers, dialling ``MASTER_ADDR:23456``, reach the first job's store through the wildcard.
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


_STORE_ARGS = (
    "host_name",
    "port",
    "world_size",
    "is_master",
    "timeout",
    "wait_for_workers",
    "multi_tenant",
    "master_listen_fd",
    "use_libuv",
)


def _pod_tcp_store(base: Any, address: str) -> Any:
    """A TCPStore whose master listens on the pod IP (a socket bound here, handed over by fd)."""

    class TCPStore(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            bound = dict(zip(_STORE_ARGS, args, strict=False))
            bound.update(kwargs)
            if bound.get("is_master") and bound.get("master_listen_fd") is None and bound.get("port"):
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    listener.bind((address, int(bound["port"])))
                    listener.listen(2048)
                    bound["master_listen_fd"] = listener.detach()  # the store owns it from now on
                except OSError:
                    listener.close()  # let torch bind as it would, and report its own error
            super().__init__(**bound)

    TCPStore.__qualname__ = TCPStore.__name__ = "TCPStore"
    return TCPStore


class _AfterTorchDistributed:
    """A post-import hook: wraps the loader of ``torch.distributed`` to patch it once it has run."""

    def __init__(self, address: str) -> None:
        self._address = address

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch.distributed":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module
        address = self._address

        def exec_module(module: Any) -> None:
            run(module)
            original = getattr(module, "TCPStore", None)
            if original is None:
                return
            patched = _pod_tcp_store(original, address)
            for name, loaded in list(sys.modules.items()):
                if name.startswith("torch.distributed") and getattr(loaded, "TCPStore", None) is original:
                    loaded.TCPStore = patched  # type: ignore[attr-defined]

        loader.exec_module = exec_module
        return spec


_address = os.environ.get("LOCAL_CLUSTER_BIND_ADDRESS")
if _address:
    _install(_address)
    if "torch.distributed" not in sys.modules:
        sys.meta_path.insert(0, _AfterTorchDistributed(_address))
_run_shadowed()
