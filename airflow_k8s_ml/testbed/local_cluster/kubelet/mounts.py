"""Volume mounts without mount namespaces: container paths are rewritten to host directories.

A process on the host cannot see a volume at ``/data``, and creating ``/data`` on the host would leak
between pods. So the kubelet rewrites every occurrence of a mount path in the container's ``command``,
``args``, literal ``env`` values and ``workingDir`` (``/data/x`` -> ``<volume dir>/x``), once, before
``$(VAR)`` expansion. A path is replaced only as a whole path component: ``/data2`` and ``s3://b/data``
stay as they are. Code that builds such paths itself (not from its arguments or environment) will not
see the volume; pass paths in, as twelve-factor workloads do anyway.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


def normalize(path: str) -> str:
    return posixpath.normpath(path) if path else path


def mount_table(
    container: Obj, volume_dirs: dict[str, Path], extra: list[Mount] | None = None
) -> list[Mount]:
    """Mounts of ``container`` (subPath applied), longest container path first so nested mounts win."""
    mounts = list(extra or [])
    for mount in container.get("volumeMounts") or []:
        base = volume_dirs.get(mount.get("name", ""))
        path = normalize(mount.get("mountPath") or "")
        if base is None or not path or path == "/":
            continue
        host = base / mount["subPath"] if mount.get("subPath") else base
        mounts.append(Mount(path, str(host), bool(mount.get("readOnly"))))
    return sorted(mounts, key=lambda m: len(m.container_path), reverse=True)


def rewriter(mounts: list[Mount]) -> Callable[[str], str]:
    """A function replacing container paths by host paths in a string (identity without mounts)."""
    table = {m.container_path: m.host_path for m in mounts if m.container_path != m.host_path}
    if not table:
        return lambda text: text
    alternatives = "|".join(re.escape(p) for p in sorted(table, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.\-/~])({alternatives})(?![\w.\-])")

    def rewrite(text: str) -> str:
        return pattern.sub(lambda m: table[m.group(1)], text)

    return rewrite
