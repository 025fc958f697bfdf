"""Where a volume may put files: the API's rules for item paths, file modes and subPaths, with upstream's
field paths and messages (pkg/apis/core/validation: validateKeyToPath, ValidateLocalNonReservedPath,
validateLocalDescendingPath, validateDownwardAPIVolumeFile, validateVolumeMounts' subPath).

The kubelet also refuses to write outside a volume when rendering it; this is the API refusing such a
pod up front with 422, as a real API server does, instead of accepting it and failing the mount.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
Cause = tuple[str, str, str]

FILE_MODE_MSG = "must be a number between 0 and 0777 (octal), both inclusive"


def _invalid(field: str, value: object, detail: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return (field, "FieldValueInvalid", f"Invalid value: {shown}: {detail}")


def descending_path(path: str, field: str) -> list[Cause]:
    """validateLocalDescendingPath: relative, and no ``..`` element."""
    causes = []
    if path.startswith("/"):
        causes.append(_invalid(field, path, "must be a relative path"))
    if ".." in path.replace("\\", "/").split("/"):
        causes.append(_invalid(field, path, "must not contain '..'"))
    return causes


def non_reserved_path(path: str, field: str) -> list[Cause]:
    """ValidateLocalNonReservedPath: also not starting with ``..`` (the kubelet's ``..data`` links)."""
    causes = descending_path(path, field)
    if path.startswith("..") and not path.startswith("../"):
        causes.append(_invalid(field, path, "must not start with '..'"))
    return causes


def _mode(value: object, field: str) -> list[Cause]:
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 0o777:
        return [_invalid(field, value, FILE_MODE_MSG)]
    return []


def key_to_path(item: Obj, field: str) -> list[Cause]:
    """validateKeyToPath (configMap and secret items)."""
    causes: list[Cause] = []
    if not item.get("key"):
        causes.append((f"{field}.key", "FieldValueRequired", "Required value"))
    path = item.get("path")
    if not path:
        causes.append((f"{field}.path", "FieldValueRequired", "Required value"))
    causes += non_reserved_path(str(path or ""), f"{field}.path")
    return causes + _mode(item.get("mode"), f"{field}.mode")


def downward_file(item: Obj, field: str) -> list[Cause]:
    """validateDownwardAPIVolumeFile: the path rules (the field references are checked elsewhere)."""
    path = item.get("path")
    if not path:
        return [(f"{field}.path", "FieldValueRequired", "Required value")]
    return non_reserved_path(str(path), f"{field}.path") + _mode(item.get("mode"), f"{field}.mode")


def _items(source: Obj, field: str, check: Any) -> list[Cause]:
    causes = _mode(source.get("defaultMode"), f"{field}.defaultMode")
    for i, item in enumerate(source.get("items") or []):
        causes += check(item or {}, f"{field}.items[{i}]")
    return causes


def validate_volume_paths(spec: Obj) -> list[Cause]:
    """Every item path, mode and subPath of a pod spec."""
    causes: list[Cause] = []
    for i, volume in enumerate(spec.get("volumes") or []):
        base = f"spec.volumes[{i}]"
        for kind in ("configMap", "secret"):
            if isinstance(volume.get(kind), dict):
                causes += _items(volume[kind], f"{base}.{kind}", key_to_path)
        if isinstance(volume.get("downwardAPI"), dict):
            causes += _items(volume["downwardAPI"], f"{base}.downwardAPI", downward_file)
        projected = volume.get("projected")
        if isinstance(projected, dict):
            causes += _mode(projected.get("defaultMode"), f"{base}.projected.defaultMode")
            for j, source in enumerate(projected.get("sources") or []):
                at = f"{base}.projected.sources[{j}]"
                for kind in ("configMap", "secret"):
                    for k, item in enumerate((source.get(kind) or {}).get("items") or []):
                        causes += key_to_path(item or {}, f"{at}.{kind}.items[{k}]")
                for k, item in enumerate((source.get("downwardAPI") or {}).get("items") or []):
                    causes += downward_file(item or {}, f"{at}.downwardAPI.items[{k}]")
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            for j, mount in enumerate(container.get("volumeMounts") or []):
                if mount.get("subPath"):
                    field = f"spec.{kind}[{i}].volumeMounts[{j}].subPath"
                    causes += descending_path(str(mount["subPath"]), field)
    return causes
