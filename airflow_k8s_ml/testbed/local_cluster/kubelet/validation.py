"""Pod validation with the apiserver's field paths and messages (pkg/apis/core/validation).

Only rules a client can plausibly trip over are checked, but each one answers exactly like upstream:
callers match on ``spec.containers[0].image: Required value``. Returns causes, never raises, so the
admission function builds one 422 with all of them (as field.ErrorList does).
"""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.k8s import quantities
from airflow_k8s_ml.k8s.names import ENV_VAR_NAME_MSG, LABEL_MSG, is_dns1123_label, is_env_var_name

from .volume_paths import validate_volume_paths

Obj = dict[str, Any]
Cause = tuple[str, str, str]  # (field, reason, message) as in a Status cause

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")

# What a pod update may change (ValidatePodSpecUpdate's message, verbatim).
UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def required(field: str) -> Cause:
    return (field, "FieldValueRequired", "Required value")


def invalid(field: str, value: object, detail: str) -> Cause:
    return (field, "FieldValueInvalid", f"Invalid value: {_go_value(value)}: {detail}")


def not_supported(field: str, value: object, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(f'"{s}"' for s in supported)
    return (field, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {listed}')


def duplicate(field: str, value: object) -> Cause:
    return (field, "FieldValueDuplicate", f'Duplicate value: "{value}"')


def not_found(field: str, value: object) -> Cause:
    return (field, "FieldValueNotFound", f'Not found: "{value}"')


def validate_pod(pod: Obj) -> list[Cause]:
    spec = pod.get("spec") or {}
    causes: list[Cause] = []
    volumes = _validate_volumes(spec.get("volumes") or [], causes)
    causes += validate_volume_paths(spec)
    containers = spec.get("containers") or []
    if not containers:
        causes.append(required("spec.containers"))
    names: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            _validate_container(container, f"spec.{kind}[{i}]", names, volumes, causes)
    policy = spec.get("restartPolicy")
    if policy not in _RESTART_POLICIES:
        causes.append(not_supported("spec.restartPolicy", policy, _RESTART_POLICIES))
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        causes.append(
            invalid("spec.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0")
        )
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline <= 0):
        causes.append(
            invalid("spec.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive")
        )
    return causes


def validate_update(new: Obj, old: Obj) -> list[Cause]:
    """Only images, activeDeadlineSeconds, added tolerations and the grace period may change."""
    if _mutable_view(new.get("spec") or {}) != _mutable_view(old.get("spec") or {}):
        return [("spec", "FieldValueForbidden", f"Forbidden: {UPDATE_FORBIDDEN}")]
    return []


def _mutable_view(spec: Obj) -> Obj:
    view = {
        k: v
        for k, v in spec.items()
        if k not in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")
    }
    for kind in ("containers", "initContainers"):
        if kind in view:
            view[kind] = [{k: v for k, v in c.items() if k != "image"} for c in view[kind] or []]
    return view


def _validate_volumes(volumes: list[Obj], causes: list[Cause]) -> set[str]:
    names: set[str] = set()
    for i, volume in enumerate(volumes):
        name = volume.get("name")
        if not name:
            causes.append(required(f"spec.volumes[{i}].name"))
        elif name in names:
            causes.append(duplicate(f"spec.volumes[{i}].name", name))
        elif not is_dns1123_label(name):
            causes.append(invalid(f"spec.volumes[{i}].name", name, LABEL_MSG))
        else:
            names.add(name)
        claim = volume.get("persistentVolumeClaim")
        if claim is not None and not claim.get("claimName"):
            causes.append(required(f"spec.volumes[{i}].persistentVolumeClaim.claimName"))
    return names


def _validate_container(
    container: Obj, path: str, names: set[str], volumes: set[str], causes: list[Cause]
) -> None:
    name = container.get("name")
    if not name:
        causes.append(required(f"{path}.name"))
    elif not is_dns1123_label(name):
        causes.append(invalid(f"{path}.name", name, LABEL_MSG))
    elif name in names:
        causes.append(duplicate(f"{path}.name", name))
    else:
        names.add(name)
    if not container.get("image"):
        causes.append(required(f"{path}.image"))
    pull = container.get("imagePullPolicy")
    if pull is not None and pull not in _PULL_POLICIES:
        causes.append(not_supported(f"{path}.imagePullPolicy", pull, _PULL_POLICIES))
    for j, env in enumerate(container.get("env") or []):
        env_name = env.get("name")
        if not env_name:
            causes.append(required(f"{path}.env[{j}].name"))
        elif not is_env_var_name(env_name):
            causes.append(invalid(f"{path}.env[{j}].name", env_name, ENV_VAR_NAME_MSG))
    for j, mount in enumerate(container.get("volumeMounts") or []):
        if not mount.get("mountPath"):
            causes.append(required(f"{path}.volumeMounts[{j}].mountPath"))
        if mount.get("name") not in volumes:
            causes.append(not_found(f"{path}.volumeMounts[{j}].name", mount.get("name")))
    _validate_resources(container.get("resources") or {}, f"{path}.resources", causes)


def _validate_resources(resources: Obj, path: str, causes: list[Cause]) -> None:
    parsed: dict[str, dict[str, Any]] = {}
    for kind in ("limits", "requests"):
        parsed[kind] = {}
        for name, value in (resources.get(kind) or {}).items():
            try:
                parsed[kind][name] = quantities.parse(value)
            except quantities.QuantityError as exc:
                causes.append(invalid(f"{path}.{kind}[{name}]", value, str(exc)))
                continue
            if parsed[kind][name] < 0:
                causes.append(invalid(f"{path}.{kind}[{name}]", value, "must be greater than or equal to 0"))
    limits, requests = parsed["limits"], parsed["requests"]
    for name, request in requests.items():
        raw = (resources.get("requests") or {}).get(name)
        extended = quantities.is_extended_resource(name)
        if extended and name not in limits:
            causes.append(
                (
                    f"{path}.limits",
                    "FieldValueRequired",
                    "Required value: Limit must be set for non overcommitable resources",
                )
            )
        elif extended and request != limits[name]:
            causes.append(
                invalid(
                    f"{path}.requests[{name}]",
                    raw,
                    f"must be equal to {name} limit of {(resources.get('limits') or {}).get(name)}",
                )
            )
        elif name in limits and request > limits[name] and name in _STANDARD_RESOURCES:
            causes.append(
                invalid(
                    f"{path}.requests",
                    raw,
                    f"must be less than or equal to {name} limit of "
                    f"{(resources.get('limits') or {}).get(name)}",
                )
            )
        if extended and request != request.to_integral_value():
            causes.append(invalid(f"{path}.requests[{name}]", raw, "must be an integer"))


def _go_value(value: object) -> str:
    """How field.Invalid prints a value: strings quoted, numbers bare."""
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    return str(value)
