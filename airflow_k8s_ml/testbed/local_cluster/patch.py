"""PATCH bodies applied the way kube-apiserver applies them: JSON Patch, JSON Merge Patch, strategic merge.

Why strategic merge is ported rather than approximated with merge patch: ``kubectl apply`` on built-in kinds
and the Python clients' default dict PATCH both send ``application/strategic-merge-patch+json`` and count on
lists being merged by key (adding a container or an env var must not drop the others), on the ``$patch``/
``$setElementOrder``/``$deleteFromPrimitiveList``/``$retainKeys`` directives and on the resulting list order.
The algorithm follows ``k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`` (``mergeMap``/``mergeSlice``,
including ``normalizeElementOrder``); where upstream reads Go struct tags we read :data:`_SCHEMAS`, a small
table of the merge keys of the built-in kinds this cluster serves.

Everything here is pure and never mutates its inputs (it works on deep copies). Failures raise
:class:`PatchError` whose ``code`` is the HTTP status the apiserver uses: 400 for an undecodable or malformed
patch, 422 for a patch that cannot be applied (a failed JSON Patch ``test`` too), 415 for an unknown type.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import StatusError

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "apply_patch",
    "json_merge_patch",
    "json_patch",
    "strategic_merge_patch",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_MERGE_PATCH)


_REASONS = {400: "BadRequest", 415: "UnsupportedMediaType"}


class PatchError(StatusError):
    """A PATCH that cannot be decoded (``code`` 400), applied (422 Invalid) or whose media type is unknown
    (415); answered as it is, like every :class:`~.errors.StatusError`.

    ``content_type`` is set for 415 and names the offending media type.
    """

    def __init__(self, message: str, code: int = 422, content_type: str | None = None) -> None:
        super().__init__(code, _REASONS.get(code, "Invalid"), message)
        self.content_type = content_type


# --------------------------------------------------------------------------------------------------------
# JSON value helpers
# --------------------------------------------------------------------------------------------------------


def _identity(value: object) -> Hashable:
    """A hashable stand-in with JSON equality: ``1 == 1.0`` but ``True != 1`` (Python conflates those)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, str):
        return ("string", value)
    return ("json", json.dumps(value, sort_keys=True, default=str))


def _json_equal(left: object, right: object) -> bool:
    return _identity(left) == _identity(right)


def _go_repr(value: object) -> str:
    """Compact rendering of a JSON value for error messages (upstream prints Go maps with ``%v``)."""
    return json.dumps(value, sort_keys=True, default=str)


# --------------------------------------------------------------------------------------------------------
# JSON Merge Patch (RFC 7386)
# --------------------------------------------------------------------------------------------------------


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes a member, anything else (lists too) replaces."""
    return _merge_patch(copy.deepcopy(target), patch)


def _merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------------------------------------------
# JSON Patch (RFC 6902) with JSON Pointers (RFC 6901)
# --------------------------------------------------------------------------------------------------------

_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_MISSING: Any = object()


def _pointer_tokens(pointer: object) -> list[str]:
    """Split a JSON Pointer; ``~1`` is unescaped before ``~0`` so ``~01`` stays ``~1`` (RFC 6901 §4)."""
    if not isinstance(pointer, str):
        raise PatchError(f"JSON pointer must be a string, got {_go_repr(pointer)}", 400)
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'JSON pointer must be empty or start with "/": "{pointer}"', 400)
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _array_index(token: str, length: int, path: str, allow_end: bool) -> int:
    """An array index token; ``-`` (one past the end) only where RFC 6902 allows it (``add``)."""
    if allow_end and token == "-":
        return length
    if not _ARRAY_INDEX.fullmatch(token):
        raise PatchError(f"invalid array index {token!r} in path {path}")
    index = int(token)
    if index > length or (index == length and not allow_end):
        raise PatchError(f"unable to access invalid index: {index} in path {path}")
    return index


def _child(container: Any, token: str, path: str) -> Any:
    if isinstance(container, dict) and token in container:
        return container[token]
    if isinstance(container, list) and _ARRAY_INDEX.fullmatch(token) and int(token) < len(container):
        return container[int(token)]
    raise PatchError(f"doc is missing path: {path}: missing value")


def _get(doc: Any, path: str) -> Any:
    value = doc
    for token in _pointer_tokens(path):
        value = _child(value, token, path)
    return value


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _pointer_tokens(path)
    container = doc
    for token in tokens[:-1]:
        container = _child(container, token, path)
    if not isinstance(container, (dict, list)):
        raise PatchError(f"doc is missing path: {path}: missing value")
    return container, tokens[-1]


def _op_add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    container, token = _parent(doc, path)
    if isinstance(container, dict):
        container[token] = value
    else:
        container.insert(_array_index(token, len(container), path, allow_end=True), value)
    return doc


def _op_remove(doc: Any, path: str) -> Any:
    if path == "":
        raise PatchError("unable to remove the whole document")
    container, token = _parent(doc, path)
    if isinstance(container, dict):
        if token not in container:
            raise PatchError(f"unable to remove nonexistent key: {token}: missing value")
        del container[token]
    else:
        del container[_array_index(token, len(container), path, allow_end=False)]
    return doc


def _op_replace(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    container, token = _parent(doc, path)
    if isinstance(container, dict):
        if token not in container:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value")
        container[token] = value
    else:
        container[_array_index(token, len(container), path, allow_end=False)] = value
    return doc


def _op_move(doc: Any, source: str, path: str) -> Any:
    if source == path:
        return doc
    if path.startswith(source + "/"):
        raise PatchError(f"move operation cannot move {source} into its own child {path}")
    value = _get(doc, source)
    return _op_add(_op_remove(doc, source), path, value)


def _op_test(doc: Any, path: str, value: Any) -> Any:
    if not _json_equal(_get(doc, path), value):
        raise PatchError(f"testing value {path} failed: test failed")
    return doc


def _operand(operation: Mapping[str, Any], name: str) -> Any:
    if name not in operation:
        raise PatchError(f"{operation.get('op')} operation is missing {name!r}: {_go_repr(operation)}", 400)
    return operation[name]


def _apply_operation(doc: Any, operation: Any) -> Any:
    if not isinstance(operation, Mapping):
        raise PatchError(f"JSON Patch operations must be objects, got {_go_repr(operation)}", 400)
    kind = operation.get("op")
    path = _operand(operation, "path")
    if kind == "add":
        return _op_add(doc, path, _operand(operation, "value"))
    if kind == "remove":
        return _op_remove(doc, path)
    if kind == "replace":
        return _op_replace(doc, path, _operand(operation, "value"))
    if kind == "move":
        return _op_move(doc, _operand(operation, "from"), path)
    if kind == "copy":
        return _op_add(doc, path, copy.deepcopy(_get(doc, _operand(operation, "from"))))
    if kind == "test":
        return _op_test(doc, path, _operand(operation, "value"))
    raise PatchError(f"Unexpected kind: {kind}", 400)


def json_patch(target: Any, ops: Sequence[Any]) -> Any:
    """RFC 6902: apply ``ops`` in order, all or nothing (any failing op, ``test`` included, raises)."""
    if not isinstance(ops, Sequence) or isinstance(ops, (str, bytes)):
        raise PatchError("a JSON Patch must be a JSON array of operations", 400)
    doc = copy.deepcopy(target)
    for operation in copy.deepcopy(list(ops)):
        doc = _apply_operation(doc, operation)
    return doc


# --------------------------------------------------------------------------------------------------------
# Strategic merge patch: the patch metadata of the built-in kinds (upstream: Go struct tags)
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """How one field patches: ``merge`` lists merge (by ``key`` for objects, as a set for scalars), other
    lists are replaced whole (upstream "atomic"); ``schema`` names the table describing the value (or each
    list item), so e.g. ``ports`` means ``containerPort`` inside a ``Container`` but ``port`` in a Service."""

    merge: bool = False
    key: str = ""
    schema: str = ""


_ATOMIC = _Field()
_SET = _Field(merge=True)


def _nested(schema: str) -> _Field:
    return _Field(schema=schema)


def _merge_by(key: str, schema: str = "") -> _Field:
    return _Field(merge=True, key=key, schema=schema)


_OBJECT_META = {"metadata": _nested("ObjectMeta")}
_CONDITIONS = {"conditions": _merge_by("type")}
_WORKLOAD = {**_OBJECT_META, "spec": _nested("WorkloadSpec"), "status": _nested("ConditionedStatus")}
_STATUS_ONLY = {**_OBJECT_META, "status": _nested("ConditionedStatus")}

_SCHEMAS: dict[str, dict[str, _Field]] = {
    "Object": _OBJECT_META,
    "ObjectMeta": {"ownerReferences": _merge_by("uid"), "finalizers": _SET},
    "ConditionedStatus": _CONDITIONS,
    "PodTemplateSpec": {**_OBJECT_META, "spec": _nested("PodSpec")},
    "PodSpec": {
        "containers": _merge_by("name", "Container"),
        "initContainers": _merge_by("name", "Container"),
        "ephemeralContainers": _merge_by("name", "Container"),
        "volumes": _merge_by("name"),
        "imagePullSecrets": _merge_by("name"),
        "hostAliases": _merge_by("ip"),
        "topologySpreadConstraints": _merge_by("topologyKey"),
        "resourceClaims": _merge_by("name"),
        "schedulingGates": _merge_by("name"),
    },
    "Container": {
        "ports": _merge_by("containerPort"),
        "env": _merge_by("name"),
        "volumeMounts": _merge_by("mountPath"),
        "volumeDevices": _merge_by("devicePath"),
    },
    "PodStatus": {
        **_CONDITIONS,
        "podIPs": _merge_by("ip"),
        "hostIPs": _merge_by("ip"),
        "resourceClaimStatuses": _merge_by("name"),
    },
    "WorkloadSpec": {"template": _nested("PodTemplateSpec")},
    "JobTemplateSpec": {**_OBJECT_META, "spec": _nested("WorkloadSpec")},
    "CronJobSpec": {"jobTemplate": _nested("JobTemplateSpec")},
    # jobset.x-k8s.io JobSetSpec (patchMergeKey=name): what Kubeflow Trainer's runtimePatches merge into.
    "JobSetSpec": {"replicatedJobs": _merge_by("name", "ReplicatedJob")},
    "ReplicatedJob": {"template": _nested("JobTemplateSpec"), "dependsOn": _merge_by("name")},
    "ServiceSpec": {"ports": _merge_by("port")},
    "NodeStatus": {**_CONDITIONS, "addresses": _merge_by("type")},
    # Kinds (the roots). Kinds not listed use "Object": only metadata merges, every other list replaces.
    "Pod": {**_OBJECT_META, "spec": _nested("PodSpec"), "status": _nested("PodStatus")},
    "PodTemplate": {**_OBJECT_META, "template": _nested("PodTemplateSpec")},
    "Job": _WORKLOAD,
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "ReplicationController": _WORKLOAD,
    "CronJob": {**_OBJECT_META, "spec": _nested("CronJobSpec")},
    "Service": {**_OBJECT_META, "spec": _nested("ServiceSpec"), "status": _nested("ConditionedStatus")},
    "Node": {**_OBJECT_META, "status": _nested("NodeStatus")},
    "ServiceAccount": {**_OBJECT_META, "secrets": _merge_by("name")},
    "Namespace": _STATUS_ONLY,
    "PersistentVolumeClaim": _STATUS_ONLY,
    "PodDisruptionBudget": _STATUS_ONLY,
    "HorizontalPodAutoscaler": _STATUS_ONLY,
}


def _lookup(schema: str, name: str) -> _Field:
    """Unknown schemas and fields are atomic: maps still merge key by key, lists are replaced."""
    return _SCHEMAS.get(schema, {}).get(name, _ATOMIC)


# --------------------------------------------------------------------------------------------------------
# Strategic merge patch: list ordering (upstream normalizeElementOrder / mergeSortedSlice)
# --------------------------------------------------------------------------------------------------------


def _item_identity(item: Any, key: str) -> Hashable:
    """What identifies a list item: its merge-key value, or the scalar itself. Objects lacking the key are
    only ever equal to themselves."""
    if not key:
        return _identity(item)
    if isinstance(item, Mapping) and key in item:
        return _identity(item[key])
    return ("unkeyed", id(item))


def _positions(order: Sequence[Any], key: str) -> dict[Hashable, int]:
    positions: dict[Hashable, int] = {}
    for index, item in enumerate(order):
        positions.setdefault(_item_identity(item, key), index)
    return positions


def _sorted_by(items: list[Any], order: Sequence[Any], key: str) -> list[Any]:
    positions = _positions(order, key)
    return sorted(items, key=lambda item: positions.get(_item_identity(item, key), len(order)))


def _interleave(left: list[Any], right: list[Any], server_order: Sequence[Any], key: str) -> list[Any]:
    """Upstream ``mergeSortedSlice``: a server-only item (left) goes first only when it is known to precede
    the next patch item (right) in the live list; so brand-new patch items land before the remaining
    server-only ones (adding a container puts it first), as a real apiserver does."""
    positions = _positions(server_order, key)
    result, i, j = [], 0, 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            result.append(left[i])
            i += 1
            continue
        if i < len(left):
            left_at = positions.get(_item_identity(left[i], key))
            right_at = positions.get(_item_identity(right[j], key))
            if left_at is not None and right_at is not None and left_at < right_at:
                result.append(left[i])
                i += 1
                continue
        result.append(right[j])
        j += 1
    return result


def _normalize_order(
    merged: list[Any], patch_order: Sequence[Any], server_order: Sequence[Any], key: str
) -> list[Any]:
    """Patch items keep the patch's relative order, server-only items the live order, then interleave."""
    in_patch = set(_positions(patch_order, key))
    from_patch = _sorted_by([i for i in merged if _item_identity(i, key) in in_patch], patch_order, key)
    server_only = _sorted_by([i for i in merged if _item_identity(i, key) not in in_patch], server_order, key)
    return _interleave(server_only, from_patch, server_order, key)


# --------------------------------------------------------------------------------------------------------
# Strategic merge patch: lists
# --------------------------------------------------------------------------------------------------------


def _items_are_maps(*lists: Sequence[Any]) -> bool:
    """Upstream ``sliceElementType``: items must be all objects or all scalars, never lists."""
    kinds = set()
    for item in (item for items in lists for item in items):
        if isinstance(item, list):
            raise PatchError("lists of lists are not supported")
        kinds.add(isinstance(item, dict))
    if len(kinds) > 1:
        raise PatchError(f"list element types are not identical: {_go_repr(list(lists))}")
    return kinds == {True}


def _require_key(item: Mapping[str, Any], key: str) -> Any:
    if key not in item:
        raise PatchError(f"map: {_go_repr(item)} does not contain declared merge key: {key}")
    return item[key]


def _special_elements(original: list[Any], patch: list[Any], field: _Field) -> tuple[list[Any], list[Any]]:
    """Apply ``{"$patch": "delete", key: v}`` and ``{"$patch": "replace"}`` items; returns the (possibly
    reduced or replaced) original and the patch without those items."""
    plain, replace = [], False
    for item in patch:
        directive = item.get("$patch", _MISSING)
        if directive is _MISSING:
            plain.append(item)
        elif directive == "delete":
            doomed = _identity(_require_key(item, field.key))
            original = [o for o in original if _item_identity(o, field.key) != doomed]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {_go_repr(item)}")
    if replace:
        return _fresh_items(plain, field), []
    return original, plain


def _merge_by_key(original: list[Any], patch: list[Any], field: _Field) -> list[Any]:
    merged = list(original)
    for item in patch:
        wanted = _identity(_require_key(item, field.key))
        index = next((i for i, o in enumerate(merged) if _item_identity(o, field.key) == wanted), None)
        if index is None:
            merged.extend(_fresh_items([item], field))
            continue
        result = _merge_map(merged[index], item, field.schema)
        if result is None:
            del merged[index]
        else:
            merged[index] = result
    return merged


def _fresh_items(items: list[Any], field: _Field) -> list[Any]:
    """Items with nothing to merge into: directives and nulls removed, ``$patch: delete`` items dropped."""
    cleaned = []
    for item in items:
        value = _merge_map({}, item, field.schema) if isinstance(item, dict) else item
        if value is not None:
            cleaned.append(value)
    return cleaned


def _merge_list(original: list[Any], patch: list[Any], field: _Field) -> list[Any]:
    """Upstream ``mergeSliceHandler``/``mergeSlice``: replace atomic lists, merge the others, then order."""
    if not field.merge:
        return _fresh_items(patch, field)
    if not original and not patch:
        return []
    if not _items_are_maps(original, patch):
        merged = list({_identity(item): item for item in [*original, *patch]}.values())
        return _normalize_order(merged, patch, original, "")
    if not field.key:
        raise PatchError("cannot merge lists without merge key")
    original, plain = _special_elements(original, patch, field)
    return _normalize_order(_merge_by_key(original, plain, field), plain, original, field.key)


# --------------------------------------------------------------------------------------------------------
# Strategic merge patch: maps and the parallel-list directives
# --------------------------------------------------------------------------------------------------------

_DELETE_PREFIX = "$deleteFromPrimitiveList/"
_ORDER_PREFIX = "$setElementOrder/"


def _retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """``$retainKeys``: clear every live key not listed (how ``kubectl apply`` switches a union such as a
    Deployment strategy or a volume source); each non-null patch key must itself be listed."""
    if "$retainKeys" not in patch:
        return
    retain = patch.pop("$retainKeys")
    if not isinstance(retain, list):
        raise PatchError("invalid patch format of retainKeys", 400)
    keep = {key for key in retain if isinstance(key, str)}
    for key, value in patch.items():
        directive = key.startswith(("$deleteFromPrimitiveList", "$setElementOrder"))
        if value is not None and not directive and key not in keep:
            raise PatchError("patch content doesn't match retainKeys list")
    for key in [key for key in original if key not in keep]:
        del original[key]


def _delete_from_primitive_lists(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """``$deleteFromPrimitiveList/<field>: [v, ...]`` removes those scalars from the live list."""
    for directive in [key for key in patch if key.startswith(_DELETE_PREFIX)]:
        doomed = patch.pop(directive)
        if not isinstance(doomed, list):
            raise PatchError("invalid patch format of primitive list", 400)
        name = directive[len(_DELETE_PREFIX) :]
        current = original.get(name)
        if isinstance(current, list):
            gone = {_identity(value) for value in doomed}
            original[name] = [value for value in current if _identity(value) not in gone]


def _check_order_list(patch_list: list[Any], order: list[Any], key: str) -> None:
    """Upstream ``validatePatchWithSetOrderList``: patch items must appear in ``$setElementOrder`` order."""
    items = [item for item in patch_list if not (isinstance(item, Mapping) and "$patch" in item)]
    at = 0
    for entry in order:
        if at < len(items) and _item_identity(items[at], key) == _item_identity(entry, key):
            at += 1
    if at < len(items):
        raise PatchError(
            f"The order in patch list:\n{_go_repr(patch_list)}\n doesn't match $setElementOrder list:\n"
            f"{_go_repr(order)}\n"
        )


def _set_element_orders(original: dict[str, Any], patch: dict[str, Any], schema: str) -> None:
    """``$setElementOrder/<field>``: merge ``<field>`` now and put the result in the order given (kubectl
    sends the full desired order of merge lists, so reordering works without resending every item)."""
    for directive in [key for key in patch if key.startswith(_ORDER_PREFIX)]:
        order = patch.pop(directive)
        if not isinstance(order, list):
            raise PatchError("invalid patch format of setElementOrder list", 400)
        name = directive[len(_ORDER_PREFIX) :]
        field = _lookup(schema, name)
        current, incoming = original.get(name, _MISSING), patch.get(name, _MISSING)
        if incoming is None or (current is _MISSING and incoming is _MISSING):
            continue  # a null still deletes the field in the main pass
        for value in (current, incoming):
            if value is not _MISSING and not isinstance(value, list):
                raise PatchError(f"$setElementOrder/{name} needs a list, got {_go_repr(value)}")
        live = [] if current is _MISSING else current
        update = [] if incoming is _MISSING else incoming
        _check_order_list(update, order, field.key)
        merged = _merge_list(live, update, field) if incoming is not _MISSING else live
        original[name] = _normalize_order(merged, order, live, field.key) if field.merge else merged
        patch.pop(name, None)


def _map_directive(patch: dict[str, Any], schema: str) -> dict[str, Any] | None:
    """``$patch`` on a map: ``replace`` swaps the whole map for the patch; ``delete`` removes it (upstream
    leaves ``{}`` when the key existed; removing it is what callers mean and equal after decoding)."""
    directive = patch.pop("$patch")
    if directive == "replace":
        return _merge_map({}, patch, schema)
    if directive == "delete":
        return None
    raise PatchError(f"unknown patch type: {directive} in map: {_go_repr(patch)}")


def _merge_value(current: Any, value: Any, field: _Field) -> Any:
    """Merge one field's patch value into its live value (``_MISSING`` if absent); ``None`` = remove."""
    if isinstance(current, dict) and isinstance(value, dict):
        return _merge_map(current, value, field.schema)
    if isinstance(current, list) and isinstance(value, list):
        return _merge_list(current, value, field)
    if isinstance(value, dict):
        return _merge_map({}, value, field.schema)
    if isinstance(value, list):
        return _merge_list([], value, field)
    return value


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: str) -> dict[str, Any] | None:
    """Upstream ``mergeMap`` over deep copies: directives first, then each key (``null`` deletes).

    Unknown ``$`` keys are dropped, like unknown fields when upstream decodes the result into a typed object.
    """
    if "$patch" in patch:
        return _map_directive(patch, schema)
    _retain_keys(original, patch)
    _delete_from_primitive_lists(original, patch)
    _set_element_orders(original, patch, schema)
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        field = _lookup(schema, key)
        merged = None if value is None else _merge_value(original.get(key, _MISSING), value, field)
        if merged is None:
            original.pop(key, None)
        else:
            original[key] = merged
    return original


def strategic_merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Apply a strategic merge patch to an object of ``kind`` as kube-apiserver does for built-in kinds.

    Lists with a merge key (containers, env, ports, volumeMounts, conditions, ownerReferences...) merge
    item by item; ``metadata.finalizers`` merges as a set; other lists are replaced. Supports ``$patch:
    replace|delete`` (on maps and as list items), ``$setElementOrder/<f>``, ``$deleteFromPrimitiveList/<f>``,
    ``$retainKeys`` and ``null`` deletion. Kinds without a table entry (custom resources) merge maps and
    replace lists.
    """
    if not isinstance(patch, Mapping):
        raise PatchError(f"a strategic merge patch must be a JSON object, got {_go_repr(patch)}", 400)
    schema = kind if kind in _SCHEMAS else "Object"
    merged = _merge_map(copy.deepcopy(dict(target)), copy.deepcopy(dict(patch)), schema)
    return {} if merged is None else merged


# --------------------------------------------------------------------------------------------------------
# Dispatch on Content-Type
# --------------------------------------------------------------------------------------------------------


def _text(body: bytes | str) -> str:
    if isinstance(body, str):
        return body
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchError(f"patch body is not UTF-8: {exc}", 400) from exc


def _decode_json(body: bytes | str) -> Any:
    try:
        return json.loads(_text(body) or "null")
    except ValueError as exc:
        raise PatchError(f"error decoding patch: {exc}", 400) from exc


def _decode_apply(body: bytes | str) -> Any:
    """Apply configurations are YAML; JSON (what kubectl and the Python clients send) is tried first so
    the common case needs no third-party parser. PyYAML (a dependency of the package) is imported lazily."""
    text = _text(body)
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PatchError(f"error decoding YAML: {exc}", 400) from exc


def _object_patch(document: Any, what: str) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise PatchError(f"{what} must be a JSON object, got {_go_repr(document)}", 400)
    return document


def _apply_json_patch(target: dict[str, Any], body: bytes | str, kind: str) -> Any:
    ops = _decode_json(body)
    if not isinstance(ops, list):
        raise PatchError(f"a JSON Patch must be a JSON array of operations, got {_go_repr(ops)}", 400)
    return json_patch(target, ops)


def _apply_merge_patch(target: dict[str, Any], body: bytes | str, kind: str) -> Any:
    return json_merge_patch(target, _object_patch(_decode_json(body), "a merge patch"))


def _apply_strategic(target: dict[str, Any], body: bytes | str, kind: str) -> Any:
    return strategic_merge_patch(target, _object_patch(_decode_json(body), "a strategic merge patch"), kind)


def _apply_server_side(target: dict[str, Any], body: bytes | str, kind: str) -> Any:
    """Server-side apply, approximated as a strategic merge of the applied configuration into the live object.

    Fields in the configuration are set (merge-keyed lists merged per item), fields it omits are kept. Not
    modelled: ``managedFields`` ownership, removal of fields this manager applied before and omits now,
    and 409 conflicts with other managers (so ``force`` changes nothing). For a missing object the caller
    passes ``{}`` and gets the configuration back, cleaned of directives and nulls.
    """
    return strategic_merge_patch(target, _object_patch(_decode_apply(body), "an apply configuration"), kind)


_HANDLERS: dict[str, Callable[[dict[str, Any], bytes | str, str], Any]] = {
    JSON_PATCH: _apply_json_patch,
    MERGE_PATCH: _apply_merge_patch,
    STRATEGIC_MERGE_PATCH: _apply_strategic,
    APPLY_PATCH: _apply_server_side,
}


def apply_patch(target: dict[str, Any], body: bytes | str, content_type: str, kind: str) -> dict[str, Any]:
    """Apply a PATCH request body to ``target`` (an object of ``kind``) according to its Content-Type.

    Parameters such as ``; charset=utf-8`` are ignored. An unknown media type raises ``PatchError`` with
    ``code=415``; the result must still be a JSON object (a JSON Patch replacing the root with a list fails).
    """
    media = content_type.split(";", 1)[0].strip().lower()
    handler = _HANDLERS.get(media)
    if handler is None:
        raise PatchError(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(PATCH_TYPES),
            415,
            content_type=media,
        )
    result = handler(target, body, kind)
    if not isinstance(result, dict):
        raise PatchError(f"the patched object must be a JSON object, got {_go_repr(result)}")
    return result
