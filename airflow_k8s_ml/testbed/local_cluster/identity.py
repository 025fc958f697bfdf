"""The cluster's identity in its state dir, kept across restarts: bearer token, pod IP block, API port
(the CA and serving certificate are :func:`.security.ensure_tls`'s).

A restarted cluster that kept them is the same cluster to its clients: their kubeconfig (server URL,
CA, token) still works, so a deferred wait that lost its connection reconnects and resumes by itself.
One server at a time may use a state dir (an exclusive ``flock``, released even by ``kill -9``).
"""

from __future__ import annotations

import fcntl
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .journal import Journal
from .security import new_token, write_private

# The 127.B.0.0/16 blocks the kubelet's IpAllocator hands pod IPs from (kubelet/network.py).
POD_IP_BLOCKS = (42, 250)


@dataclass(frozen=True)
class Identity:
    token: str
    pod_ip_block: int
    port: int  # the port last served (0: none yet); reused when free


def load_identity(state_dir: Path, journal: Journal, token: str | None = None) -> Identity:
    """Read the identity, creating what is missing (an explicit ``token`` wins and is kept)."""
    token_path = state_dir / "token"
    if token is None and token_path.exists():
        token = token_path.read_text().strip() or None
    token = token or new_token()
    write_private(token_path, token)
    block = journal.get("pod_ip_block")
    if block is None:
        block = str(random.randint(*POD_IP_BLOCKS))
        journal.put("pod_ip_block", block)
    return Identity(token, int(block), int(journal.get("port") or 0))


class StateDirLock:
    """An exclusive lock on the state dir for as long as the server runs."""

    def __init__(self, state_dir: Path) -> None:
        path = state_dir / "lock"
        self._fh: IO[bytes] | None = open(path, "ab")  # noqa: SIM115 - held until release()
        os.chmod(path, 0o600)
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._fh.close()
            self._fh = None
            raise RuntimeError(f"the state dir {state_dir} is in use by another local cluster") from exc

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the descriptor drops the flock
            self._fh = None
