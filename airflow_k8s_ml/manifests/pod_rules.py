"""What makes a set of pod arguments valid, as plain functions over plain values.

Why apart from :mod:`~airflow_k8s_ml.manifests.pod`: the operators check their static arguments every time a
DAG file is parsed, and the dag processor parses in a fresh fork each time, so whatever the check imports is
paid on every parse. A frozen dataclass costs about a millisecond of code generation when its module is
imported; these rules need none. :class:`~airflow_k8s_ml.manifests.pod.PodTemplate` applies exactly these
functions in ``__post_init__``, so a parse-time check and a built template can never disagree.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_k8s_ml.manifests.formats import (
    validate_annotations,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_label_key,
    validate_labels,
)
from airflow_k8s_ml.manifests.pod_fields import pod_defaults
from airflow_k8s_ml.manifests.quantities import (
    GPU_RESOURCE,
    format_quantity,
    is_extended_resource,
    validate_resource_name,
    validate_resources,
)
from airflow_k8s_ml.manifests.validation import (
    check_bool,
    check_choice,
    check_env_name,
    check_int,
    check_mapping,
    check_non_empty_str,
    check_optional_int,
    check_str_map,
    check_str_sequence,
    fail,
)

__all__ = [
    "POD_DEFAULTS",
    "SHM_VOLUME",
    "TOLERATION_DEFAULTS",
    "VOLUME_DEFAULTS",
    "check_injected_env",
    "check_pod_fields",
    "toleration_fields",
    "volume_fields",
]

#: Every :class:`~airflow_k8s_ml.manifests.pod.PodTemplate` field but ``image`` (required), with its default,
#: from the one declaration (:data:`~airflow_k8s_ml.manifests.pod_fields.POD_FIELDS`).
#: ``tests/unit/test_manifests_rules.py`` checks that PodTemplate has exactly these fields.
POD_DEFAULTS: Mapping[str, Any] = pod_defaults()
#: The fields of a :class:`~airflow_k8s_ml.manifests.pod.Toleration`, with their defaults.
TOLERATION_DEFAULTS: Mapping[str, Any] = {
    "key": None,
    "operator": "Equal",
    "value": None,
    "effect": None,
    "toleration_seconds": None,
}
#: The fields of a :class:`~airflow_k8s_ml.manifests.pod.Volume` but the required ``name`` and
#: ``mount_path``, with their defaults.
VOLUME_DEFAULTS: Mapping[str, Any] = {
    "pvc": None,
    "empty_dir": False,
    "config_map": None,
    "secret": None,
    "read_only": False,
    "sub_path": None,
    "size_limit": None,
    "medium": None,
}
#: The memory-backed volume ``shm_size`` adds at ``/dev/shm``.
SHM_VOLUME = "dshm"

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")


def _snake(key: str) -> str:
    """camelCase -> snake_case (an ASCII capital after the first character gets a ``_``)."""
    chars = (f"_{char}" if index and "A" <= char <= "Z" else char for index, char in enumerate(key))
    return "".join(chars).lower()


def _item_fields(value: Any, known: Sequence[str], field: str, what: str) -> dict[str, Any]:
    """A mapping (snake_case or the Kubernetes camelCase) -> field values; unknown keys are errors."""
    if not isinstance(value, Mapping):
        raise fail(field, f"must be a {what} or a mapping, got {value!r}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _snake(str(key))
        if name not in known:
            raise fail(f"{field}.{key}", f"unknown key; expected one of {', '.join(sorted(known))}")
        out[name] = item
    return out


def toleration_fields(value: Any, field: str = "tolerations") -> dict[str, Any]:
    """A toleration given as a mapping -> its checked fields (defaults filled in)."""
    known = tuple(TOLERATION_DEFAULTS)
    toleration = {**TOLERATION_DEFAULTS, **_item_fields(value, known, field, "Toleration")}
    check_choice(toleration["operator"], ("Equal", "Exists"), f"{field}.operator")
    if toleration["key"]:
        validate_label_key(toleration["key"], f"{field}.key")
    elif toleration["operator"] != "Exists":
        raise fail(f"{field}.operator", "must be Exists when key is empty (tolerate every taint)")
    if toleration["operator"] == "Exists" and toleration["value"]:
        raise fail(f"{field}.value", "must be empty when operator is Exists")
    if toleration["effect"] is not None:
        check_choice(toleration["effect"], _EFFECTS, f"{field}.effect")
    check_optional_int(toleration["toleration_seconds"], f"{field}.toleration_seconds")
    if toleration["toleration_seconds"] is not None and toleration["effect"] != "NoExecute":
        raise fail(f"{field}.toleration_seconds", "only applies with effect NoExecute")
    return toleration


def volume_fields(value: Any, field: str = "volumes") -> dict[str, Any]:
    """A volume (and its mount) given as a mapping -> its checked fields (defaults filled in).

    One source: ``pvc``, ``empty_dir``, ``config_map`` or ``secret``.
    """
    given = _item_fields(value, ("name", "mount_path", *VOLUME_DEFAULTS), field, "Volume")
    for required in ("name", "mount_path"):
        if required not in given:
            raise fail(f"{field}.{required}", "is required")
    volume = {**VOLUME_DEFAULTS, **given}
    validate_dns1123_label(volume["name"], f"{field}.name")
    path = check_non_empty_str(volume["mount_path"], f"{field}.mount_path")
    if not path.startswith("/"):
        raise fail(f"{field}.mount_path", f"must be an absolute path, got {path!r}")
    sources = [s for s in ("pvc", "config_map", "secret") if volume[s] is not None]
    if check_bool(volume["empty_dir"], f"{field}.empty_dir"):
        sources.append("empty_dir")
    if len(sources) != 1:
        raise fail(
            field, f"volume {volume['name']!r} needs exactly one of pvc, empty_dir, config_map, secret"
        )
    for source in ("pvc", "config_map", "secret"):
        if volume[source] is not None:
            validate_dns1123_subdomain(volume[source], f"{field}.{source}")
    check_bool(volume["read_only"], f"{field}.read_only")
    if volume["sub_path"] is not None:
        sub = check_non_empty_str(volume["sub_path"], f"{field}.sub_path")
        if sub.startswith("/") or ".." in sub.split("/"):
            raise fail(f"{field}.sub_path", f"must be a relative path without '..', got {sub!r}")
    if (volume["size_limit"] is not None or volume["medium"] is not None) and not volume["empty_dir"]:
        raise fail(field, "size_limit and medium apply to empty_dir volumes only")
    if volume["size_limit"] is not None:
        format_quantity(volume["size_limit"], f"{field}.size_limit")
    if volume["medium"] is not None:
        check_choice(volume["medium"], ("", "Memory"), f"{field}.medium")
    return volume


def check_pod_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check pod arguments (``image`` plus any of :data:`POD_DEFAULTS`) and return all of them normalised.

    Normalised: sequences become tuples and mappings fresh dicts (so nothing the caller still holds can change
    them afterwards), env values text, tolerations and volumes tuples of field mappings
    (:func:`toleration_fields`, :func:`volume_fields`). Raises ``ValidationError`` naming the argument.
    """
    unknown = sorted(set(values) - {"image", *POD_DEFAULTS})
    if unknown:
        raise fail(unknown[0], "is not a pod argument")
    pod = {**POD_DEFAULTS, **values}
    if "image" not in values:
        raise fail("image", "is required")
    pod["image"] = image = check_non_empty_str(pod["image"], "image")
    if any(ch.isspace() for ch in image):
        raise fail("image", f"must not contain whitespace, got {image!r}")
    for name in ("command", "args"):
        if pod[name] is not None:
            pod[name] = check_str_sequence(pod[name], name)
    if pod["working_dir"] is not None and not str(pod["working_dir"]).startswith("/"):
        raise fail("working_dir", f"must be an absolute path, got {pod['working_dir']!r}")
    _check_env(pod)
    for name in ("env_from_secrets", "env_from_config_maps", "image_pull_secrets"):
        refs = check_str_sequence(pod[name], name)
        for index, ref in enumerate(refs):
            validate_dns1123_subdomain(ref, f"{name}[{index}]")
        pod[name] = refs
    _check_resources(pod)
    node_selector = check_str_map(pod["node_selector"], "node_selector")
    pod["node_selector"] = validate_labels(node_selector, "node_selector")
    _check_tolerations_and_volumes(pod)
    if pod["affinity"] is not None:
        pod["affinity"] = copy.deepcopy(dict(check_mapping(pod["affinity"], "affinity")))
    if pod["image_pull_policy"] is not None:
        check_choice(pod["image_pull_policy"], _PULL_POLICIES, "image_pull_policy")
    for name in ("service_account", "scheduler_name", "priority_class_name"):
        if pod[name] is not None:
            validate_dns1123_subdomain(pod[name], name)
    check_optional_int(pod["termination_grace_period_seconds"], "termination_grace_period_seconds", minimum=0)
    for name in ("pod_security_context", "container_security_context"):
        if pod[name] is not None:
            pod[name] = copy.deepcopy(dict(check_mapping(pod[name], name)))
    pod["labels"] = validate_labels(pod["labels"], "labels")
    pod["annotations"] = validate_annotations(pod["annotations"], "annotations")
    return pod


def check_injected_env(pod: Mapping[str, Any], injected: Mapping[str, str], where: str = "") -> None:
    """No variable of the pod's (``env``, ``secret_env``, ``config_map_env``, ``field_env``) may be one the
    operator injects: the user's would silently lose (or win), so it is an error naming it.

    The one "set by the operator" check: typed pod arguments, operator ``env`` arguments and the containers
    of a raw manifest (``where``: the container's path, ending in ``.``) all come here."""
    for name in ("env", "secret_env", "config_map_env", "field_env"):
        for var in pod.get(name) or {}:
            if var in injected:
                raise fail(
                    f"{where}{name}[{var}]", f"{var} is set by the operator ({injected[var]!r}); remove it"
                )


def _parse_key_ref(ref: Any, field: str, what: str) -> tuple[str, str]:
    """``"name:key"`` -> (name, key), for ``secret_env`` / ``config_map_env``."""
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise fail(field, f"must be '<{what}-name>:<key>', got {ref!r}")
    name, key = ref.split(":")
    validate_dns1123_subdomain(name, field)
    if not key or not re.fullmatch(r"[-._a-zA-Z0-9]+", key):
        raise fail(field, f"invalid {what} key {key!r}: must be [-._a-zA-Z0-9]+")
    return name, key


def _check_env(pod: dict[str, Any]) -> None:
    env: dict[str, str] = {}
    for var, value in check_mapping(pod["env"], "env").items():
        check_env_name(var, f"env[{var}]")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise fail(f"env[{var}]", f"must be a string or a number, got {value!r}")
        env[var] = str(value)
    pod["env"] = env
    for name, what in (("secret_env", "secret"), ("config_map_env", "configmap")):
        refs = check_str_map(pod[name], name)
        for var, ref in refs.items():
            check_env_name(var, f"{name}[{var}]")
            _parse_key_ref(ref, f"{name}[{var}]", what)
        pod[name] = refs
    field_env = check_str_map(pod["field_env"], "field_env")
    for var in field_env:
        check_env_name(var, f"field_env[{var}]")
    pod["field_env"] = field_env
    seen: set[str] = set()
    for name in ("env", "secret_env", "config_map_env", "field_env"):
        for var in pod[name]:
            if var in seen:
                raise fail(f"{name}[{var}]", f"{var} is set more than once across env/secret_env/...")
            seen.add(var)


def _check_resources(pod: dict[str, Any]) -> None:
    gpus, gpu_resource = pod["gpus"], pod["gpu_resource"]
    if isinstance(gpus, float):
        raise fail("gpus", f"must be a whole number of devices (use a MIG resource for slices), got {gpus}")
    check_int(gpus, "gpus", minimum=0)
    validate_resource_name(gpu_resource, "gpu_resource")
    if not is_extended_resource(gpu_resource):
        raise fail("gpu_resource", f"must be a device resource such as {GPU_RESOURCE}, got {gpu_resource!r}")
    requests, limits = validate_resources(pod["requests"], pod["limits"])
    if gpus and (gpu_resource in requests or gpu_resource in limits):
        raise fail("gpus", f"conflicts with {gpu_resource} given in requests/limits; set it once")
    pod["requests"], pod["limits"] = requests, limits
    if pod["shm_size"] is not None:
        format_quantity(pod["shm_size"], "shm_size")


def _sequence(value: Any, name: str) -> tuple[Any, ...]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise fail(name, f"must be a list, got {type(value).__name__}")
    return tuple(value)


def _check_tolerations_and_volumes(pod: dict[str, Any]) -> None:
    tolerations = _sequence(pod["tolerations"], "tolerations")
    pod["tolerations"] = tuple(toleration_fields(t, f"tolerations[{i}]") for i, t in enumerate(tolerations))
    volumes = tuple(
        volume_fields(v, f"volumes[{i}]") for i, v in enumerate(_sequence(pod["volumes"], "volumes"))
    )
    shm = pod["shm_size"] is not None
    names: set[str] = {SHM_VOLUME} if shm else set()
    paths: set[str] = {"/dev/shm"} if shm else set()
    for index, volume in enumerate(volumes):
        if volume["name"] in names:
            raise fail(f"volumes[{index}].name", f"duplicate volume name {volume['name']!r}")
        if volume["mount_path"] in paths:
            raise fail(f"volumes[{index}].mount_path", f"duplicate mount path {volume['mount_path']!r}")
        names.add(volume["name"])
        paths.add(volume["mount_path"])
    pod["volumes"] = volumes
