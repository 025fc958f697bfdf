"""The values a pod worker and its container runners hand each other: why and how fast a pod's containers
must stop, and how the next instance of a container is started.

Their own module so that the worker (which makes them) and the container runner (which reads them)
share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .runtime import Credentials


@dataclass
class StopRequest:
    """Why and how fast the pod's containers must stop. ``kind``: delete | evict | deadline | removed |
    shutdown; ``reason``/``message`` become the pod's for evict and deadline."""

    kind: str
    grace: float
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class Launch:
    """argv, environment, working directory and user of a container's next instance."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    credentials: Credentials | None = None
