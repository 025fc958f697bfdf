"""The runtime snapshot (pkg/runtime/core/snapshot.go): the first reconcile of a TrainJob copies its runtime
into a ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``, YAML, controlled by the TrainJob), and
later renders read the copy, so editing or deleting the runtime does not change a TrainJob that started.
Pure: building the ConfigMap and reading it back.
"""

from __future__ import annotations

from typing import Any

from ...meta import controller_ref, owner_reference
from .api import GROUP, Obj, runtime_ref

SUFFIX, DATA_KEY = "-runtime-snapshot", "runtime"


def snapshot_name(tj: Obj) -> str:
    return f"{tj['metadata']['name']}{SUFFIX}"


def snapshot_configmap(tj: Obj, runtime: Obj) -> Obj:
    import yaml  # local import, as the server's own YAML decoding does

    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": snapshot_name(tj),
            "namespace": tj["metadata"]["namespace"],
            "ownerReferences": [owner_reference(tj)],
        },
        "data": {DATA_KEY: yaml.safe_dump(_snapshot_of(runtime), sort_keys=False)},
    }


def _snapshot_of(runtime: Obj) -> Obj:
    """What upstream serializes: the typed object (apiVersion, kind, metadata, spec)."""
    return {k: runtime[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in runtime}


def runtime_from_snapshot(tj: Obj, configmap: Obj) -> Obj:
    """The runtime kept in ``configmap``; ValueError with upstream's message when it is not usable."""
    import yaml

    if (controller_ref(configmap) or {}).get("uid") != tj["metadata"].get("uid"):
        raise ValueError(
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
        )
    text = (configmap.get("data") or {}).get(DATA_KEY)
    if text is None:
        raise ValueError(f'invalid runtime snapshot: snapshot ConfigMap missing "{DATA_KEY}" data key')
    try:
        runtime: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"invalid runtime snapshot: unable to unmarshal the snapshot: {exc}") from exc
    if not isinstance(runtime, dict):
        raise ValueError("invalid runtime snapshot: unable to unmarshal the snapshot: not an object")
    ref = runtime_ref(tj)
    group = str(runtime.get("apiVersion", "")).partition("/")[0]
    found = (runtime.get("metadata") or {}).get("name"), group, runtime.get("kind")
    wanted = ref.get("name"), ref.get("apiGroup") or GROUP, ref.get("kind")
    if found != wanted:
        raise ValueError(
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting a runtime with "
            f'name, api group and kind of "{wanted[0]}", "{wanted[1]}", "{wanted[2]}" but found runtime with '
            f'name, api group and kind of "{found[0]}", "{found[1]}", "{found[2]}"'
        )
    return runtime
