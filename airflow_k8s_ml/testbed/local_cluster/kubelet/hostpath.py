"""``--deny-host-path``: refuse pods with hostPath volumes at create, as a PodSecurity admission would.

A hostPath volume is the host's own directory (``hostPath: {path: /}`` reads the whole machine), since
the local cluster's containers are processes on the host. With the policy on, a pod naming one is
refused with 403 Forbidden in the shape of PodSecurity's ``baseline`` message; pods created by
controllers fail to be created the same way (their ``FailedCreate`` events carry the message).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import errors

Obj = dict[str, Any]


def host_path_volumes(pod: Obj) -> list[str]:
    return [str(v.get("name", "")) for v in (pod.get("spec") or {}).get("volumes") or [] if "hostPath" in v]


def forbid_message(pod: Obj, names: list[str]) -> str:
    meta = pod.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName", "")
    listed = ", ".join(f'"{n}"' for n in names)
    noun = "volume" if len(names) == 1 else "volumes"
    return (
        f'pods "{name}" is forbidden: violates the local cluster\'s policy (--deny-host-path): '
        f"hostPath volumes ({noun} {listed})"
    )


def deny_host_path() -> Callable[[Obj, Obj | None], Obj]:
    """Admission for pods: only creates are checked (volumes of a pod are immutable)."""

    def admit(pod: Obj, old: Obj | None) -> Obj:
        names = host_path_volumes(pod)
        if old is None and names:
            meta = pod.get("metadata") or {}
            details = {"name": meta.get("name", ""), "kind": "pods"}
            raise errors.StatusError(403, "Forbidden", forbid_message(pod, names), details)
        return pod

    return admit
