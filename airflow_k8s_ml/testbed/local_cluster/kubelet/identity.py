"""Who a container's processes run as: the securityContext's ``runAsUser``/``runAsGroup``/groups and the
kubelet's ``verifyRunAsNonRoot`` (pure functions).

The local "images" are not unpacked, so an image has no ``USER`` of its own: its user is the one its
:class:`~..settings.ImageRule` declares (``user``), else the user the cluster runs as (root when the
cluster runs as root, as for most public images, which declare no ``USER``). Identities can only be
switched when the cluster runs as root; otherwise every process runs as the cluster's user, and a pod
asking for another uid gets a Warning event saying so (see docs/local-cluster.md, security model).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .runtime import Credentials

Obj = dict[str, Any]


@dataclass(frozen=True)
class Identity:
    """What the container runs as, and whether the kubelet could make it so."""

    credentials: Credentials | None  # None: the kubelet's own (not root, or nothing to switch)
    uid: int  # the uid the process will have
    ignored: tuple[str, ...] = ()  # fields asked for but not applied (the cluster is not root)


def effective_context(pod: Obj, container: Obj) -> Obj:
    """``DetermineEffectiveSecurityContext`` for the user fields: the container's override the pod's."""
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    container_sc = container.get("securityContext") or {}
    merged = {k: pod_sc[k] for k in ("runAsUser", "runAsGroup", "runAsNonRoot") if pod_sc.get(k) is not None}
    merged.update({k: v for k, v in container_sc.items() if v is not None})
    return merged


def pod_ref(pod: Obj) -> str:
    """``format.Pod``: ``name_namespace(uid)``."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('name', '')}_{meta.get('namespace', '')}({meta.get('uid', '')})"


def verify_run_as_non_root(pod: Obj, container: Obj, image_uid: int) -> str | None:
    """The error upstream's kubelet gives (CreateContainerConfigError), or None when allowed."""
    sc = effective_context(pod, container)
    if not sc.get("runAsNonRoot"):
        return None
    where = f'(pod: "{pod_ref(pod)}", container: {container.get("name", "")})'
    if sc.get("runAsUser") is not None:
        if int(sc["runAsUser"]) == 0:
            return f"container's runAsUser breaks non-root policy {where}"
        return None
    if image_uid == 0:
        return f"container has runAsNonRoot and image will run as root {where}"
    return None


def identity(pod: Obj, container: Obj, image_uid: int, as_root: bool | None = None) -> Identity:
    """The credentials to start the process with: runAsUser (else the image's user), runAsGroup (else
    the user's primary group, which the runtime reads from the image's /etc/passwd - here the host's - or
    0 for an unknown uid), supplementalGroups and fsGroup as extra groups (the runtime adds fsGroup)."""
    root = os.geteuid() == 0 if as_root is None else as_root
    sc = effective_context(pod, container)
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    uid = int(sc["runAsUser"]) if sc.get("runAsUser") is not None else image_uid
    groups = [int(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        groups.append(int(pod_sc["fsGroup"]))
    if not root:
        asked = [k for k in ("runAsUser", "runAsGroup") if sc.get(k) is not None and int(sc[k]) != _own(k)]
        if groups:
            asked.append("supplementalGroups/fsGroup")
        return Identity(None, os.geteuid(), tuple(asked))
    gid = int(sc["runAsGroup"]) if sc.get("runAsGroup") is not None else _primary_group(uid)
    if uid == 0 and gid == 0 and not groups:
        return Identity(None, 0)
    return Identity(Credentials(uid, gid, tuple(dict.fromkeys(groups))), uid)


def _own(field: str) -> int:
    return os.geteuid() if field == "runAsUser" else os.getegid()


def _primary_group(uid: int) -> int:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return 0
