"""Volumes as directories on the host, set up once per pod before its containers start.

- ``emptyDir``: ``<pod dir>/volumes/<name>``, removed with the pod.
- ``hostPath``: the host path itself (type checks as upstream).
- ``configMap``, ``secret``, ``downwardAPI``, ``projected``: files written into ``<pod dir>/volumes/<name>``
  (``items``/``defaultMode``/``mode`` honoured); written once at pod start, not refreshed.
- ``persistentVolumeClaim``: ``<state dir>/pvc/<namespace>/<claim>``, which outlives pods (and the cluster).
Any other volume type fails to mount with a message saying so. Failures raise :class:`MountError`, which
the kubelet reports as a ``FailedMount`` event while it retries, as upstream does.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import LocalClusterError
from .envvars import field_value

Obj = dict[str, Any]
Lookup = Callable[[str], Obj | None]

_HOST_PATH_CHECKS: dict[str, tuple[Callable[[int], bool], str]] = {
    "Directory": (stat.S_ISDIR, "is not a directory"),
    "File": (stat.S_ISREG, "is not a file"),
    "Socket": (stat.S_ISSOCK, "is not a socket file"),
    "CharDevice": (stat.S_ISCHR, "is not a character device"),
    "BlockDevice": (stat.S_ISBLK, "is not a block device"),
}


class MountError(LocalClusterError):
    """A volume cannot be set up yet; the message follows ``MountVolume.SetUp failed for volume``."""


def pod_dir(state_dir: Path, pod: Obj) -> Path:
    """Like /var/log/pods: ``<namespace>_<name>_<uid>``, unique even when a name is reused."""
    meta = pod["metadata"]
    return state_dir / "pods" / f"{meta.get('namespace', '')}_{meta['name']}_{meta['uid']}"


def claim_dir(state_dir: Path, namespace: str, claim: str) -> Path:
    return state_dir / "pvc" / namespace / claim


def prepare(pod: Obj, root: Path, state_dir: Path, secret: Lookup, config_map: Lookup) -> dict[str, Path]:
    """Create every volume of ``pod``; returns volume name -> host directory (or file)."""
    dirs: dict[str, Path] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = volume.get("name", "")
        try:
            dirs[name] = _prepare_one(pod, volume, root / "volumes" / name, state_dir, secret, config_map)
        except MountError as exc:
            raise MountError(f'MountVolume.SetUp failed for volume "{name}" : {exc}') from None
    return dirs


def _prepare_one(
    pod: Obj, volume: Obj, target: Path, state_dir: Path, secret: Lookup, config_map: Lookup
) -> Path:
    namespace = pod["metadata"].get("namespace", "")
    if volume.get("hostPath") is not None:
        return _host_path(volume["hostPath"])
    if volume.get("persistentVolumeClaim") is not None:
        path = claim_dir(state_dir, namespace, volume["persistentVolumeClaim"].get("claimName", ""))
        path.mkdir(parents=True, exist_ok=True)
        return path
    target.mkdir(parents=True, exist_ok=True)
    if "emptyDir" in volume:
        return target
    files = _projected_files(pod, volume, secret, config_map)
    if files is None:
        kinds = sorted(k for k in volume if k != "name")
        raise MountError(f"volume type {kinds} is not supported by the local cluster")
    for relative, (content, mode) in files.items():
        _write_file(target, relative, content, mode)
    return target


def _projected_files(
    pod: Obj, volume: Obj, secret: Lookup, config_map: Lookup
) -> dict[str, tuple[bytes, int]] | None:
    if volume.get("configMap") is not None:
        return _source_files(
            volume["configMap"], config_map, "configmap", volume["configMap"].get("defaultMode")
        )
    if volume.get("secret") is not None:
        src = dict(volume["secret"], name=volume["secret"].get("secretName", ""))
        return _source_files(src, secret, "secret", src.get("defaultMode"))
    if volume.get("downwardAPI") is not None:
        return _downward_files(pod, volume["downwardAPI"], volume["downwardAPI"].get("defaultMode"))
    if volume.get("projected") is not None:
        mode = volume["projected"].get("defaultMode")
        files: dict[str, tuple[bytes, int]] = {}
        for source in volume["projected"].get("sources") or []:
            if source.get("configMap") is not None:
                files.update(_source_files(source["configMap"], config_map, "configmap", mode))
            elif source.get("secret") is not None:
                files.update(_source_files(source["secret"], secret, "secret", mode))
            elif source.get("downwardAPI") is not None:
                files.update(_downward_files(pod, source["downwardAPI"], mode))
        return files
    return None


def _source_files(
    src: Obj, lookup: Lookup, kind: str, default_mode: int | None
) -> dict[str, tuple[bytes, int]]:
    mode = default_mode if default_mode is not None else 0o644
    obj = lookup(src.get("name", ""))
    if obj is None:
        if src.get("optional"):
            return {}
        raise MountError(f'{kind} "{src.get("name", "")}" not found')
    data = _data_bytes(obj, kind)
    items = src.get("items")
    if not items:
        return {key: (value, mode) for key, value in data.items()}
    files = {}
    for item in items:
        key = item.get("key", "")
        if key not in data:
            if src.get("optional"):
                continue
            what = "config" if kind == "configmap" else "secret"
            raise MountError(f"{kind} references non-existent {what} key: {key}")
        files[item.get("path") or key] = (
            data[key],
            item.get("mode") if item.get("mode") is not None else mode,
        )
    return files


def _data_bytes(obj: Obj, kind: str) -> dict[str, bytes]:
    if kind == "secret":
        data = {k: base64.b64decode(v or "") for k, v in (obj.get("data") or {}).items()}
        data.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
        return data
    data = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    data.update({k: base64.b64decode(v or "") for k, v in (obj.get("binaryData") or {}).items()})
    return data


def _downward_files(pod: Obj, src: Obj, default_mode: int | None) -> dict[str, tuple[bytes, int]]:
    mode = default_mode if default_mode is not None else 0o644
    files = {}
    for item in src.get("items") or []:
        if item.get("fieldRef") is not None:
            value = field_value(pod, item["fieldRef"].get("fieldPath", ""))
            files[item.get("path", "")] = (
                value.encode(),
                item.get("mode") if item.get("mode") is not None else mode,
            )
    return files


def _write_file(root: Path, relative: str, content: bytes, mode: int) -> None:
    parts = Path(relative).parts
    if not parts or ".." in parts or Path(relative).is_absolute():
        raise MountError(f"invalid path {relative!r}")
    path = root.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o600)
    path.write_bytes(content)
    path.chmod(mode & 0o777)


def _host_path(source: Obj) -> Path:
    path = Path(source.get("path", ""))
    kind = source.get("type") or ""
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "FileOrCreate":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    elif kind in _HOST_PATH_CHECKS:
        check, problem = _HOST_PATH_CHECKS[kind]
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise MountError(f"hostPath type check failed: {path} {problem}") from None
        if not check(mode):
            raise MountError(f"hostPath type check failed: {path} {problem}")
    return path
