"""A container's environment, resolved the way the kubelet does (kubelet_pods.go makeEnvironmentVariables).

``envFrom`` first (later sources win, invalid names skipped), then ``env`` in order; literal values may
reference earlier variables as ``$(VAR)`` (``$$`` escapes). Missing Secrets/ConfigMaps or keys raise
:class:`ConfigError` with the kubelet's message, which becomes ``CreateContainerConfigError``.
Pure apart from the two lookups passed in.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from airflow_k8s_ml.k8s import quantities
from airflow_k8s_ml.k8s.names import is_env_var_name

from ..errors import LocalClusterError

Obj = dict[str, Any]
Lookup = Callable[[str], Obj | None]  # name -> object in the pod's namespace, or None

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


class ConfigError(LocalClusterError):
    """The container cannot be configured yet (missing Secret/ConfigMap/key): retried until resolved."""

    reason = "CreateContainerConfigError"


class CreateContainerError(ConfigError):
    """The container cannot be created as specified (e.g. neither a command nor an image command prefix)."""

    reason = "CreateContainerError"


@dataclass
class Sources:
    secret: Lookup
    config_map: Lookup
    allocatable: dict[str, Decimal] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # InvalidEnvironmentVariableNames events


def expand(text: str, mapping: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: unknown references stay as written, ``$$`` is a literal ``$``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            end = text.find(")", i + 2) if nxt == "(" else -1
            if end != -1:
                name = text[i + 2 : end]
                out.append(mapping.get(name, text[i : end + 1]))
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def resolve(
    pod: Obj,
    container: Obj,
    sources: Sources,
    service_env: dict[str, str],
    rewrite: Callable[[str], str] = lambda s: s,
) -> dict[str, str]:
    """The variables a container's spec defines (not the runtime's PATH/HOME, which the caller adds)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        env.update(_env_from(pod, source, sources))
    for var in container.get("env") or []:
        name = var.get("name", "")
        if "valueFrom" in var and var["valueFrom"] is not None:
            value = _value_from(pod, container, var["valueFrom"], sources)
            if value is None:
                continue  # an optional reference that is missing: the variable is not set
            env[name] = value
        else:
            env[name] = expand(rewrite(var.get("value") or ""), {**service_env, **env})
    return env


def _env_from(pod: Obj, source: Obj, sources: Sources) -> dict[str, str]:
    namespace = pod["metadata"].get("namespace", "")
    prefix = source.get("prefix") or ""
    if source.get("configMapRef") is not None:
        ref, kind, label = source["configMapRef"], "configmap", "configMap"
        obj = sources.config_map(ref.get("name", ""))
        data = dict((obj or {}).get("data") or {})
    else:
        ref, kind, label = source.get("secretRef") or {}, "secret", "secret"
        obj = sources.secret(ref.get("name", ""))
        data = _secret_data(obj or {})
    if obj is None:
        if ref.get("optional"):
            return {}
        raise ConfigError(f'{kind} "{ref.get("name", "")}" not found')
    result, invalid = {}, []
    for key, value in data.items():
        if is_env_var_name(prefix + key):
            result[prefix + key] = value
        else:
            invalid.append(prefix + key)
    if invalid:
        sources.warnings.append(
            f"Keys [{' '.join(sorted(invalid))}] from the EnvFrom {label} {namespace}/{ref.get('name', '')} "
            "were skipped since they are considered invalid environment variable names."
        )
    return result


def _value_from(pod: Obj, container: Obj, value_from: Obj, sources: Sources) -> str | None:
    namespace = pod["metadata"].get("namespace", "")
    if value_from.get("fieldRef") is not None:
        return field_value(pod, value_from["fieldRef"].get("fieldPath", ""))
    if value_from.get("resourceFieldRef") is not None:
        return resource_value(pod, container, value_from["resourceFieldRef"], sources.allocatable)
    if value_from.get("secretKeyRef") is not None:
        ref = value_from["secretKeyRef"]
        return _key_value(
            ref, sources.secret(ref.get("name", "")), "secret", "Secret", namespace, _secret_data
        )
    if value_from.get("configMapKeyRef") is not None:
        ref = value_from["configMapKeyRef"]
        return _key_value(
            ref,
            sources.config_map(ref.get("name", "")),
            "configmap",
            "ConfigMap",
            namespace,
            lambda o: dict(o.get("data") or {}),
        )
    return ""


def _key_value(
    ref: Obj,
    obj: Obj | None,
    kind: str,
    kind_title: str,
    namespace: str,
    data_of: Callable[[Obj], dict[str, str]],
) -> str | None:
    name, key = ref.get("name", ""), ref.get("key", "")
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f'{kind} "{name}" not found')
    data = data_of(obj)
    if key not in data:
        if ref.get("optional"):
            return None
        raise ConfigError(f"couldn't find key {key} in {kind_title} {namespace}/{name}")
    return data[key]


def _secret_data(secret: Obj) -> dict[str, str]:
    data = {
        k: base64.b64decode(v or "").decode("utf-8", "replace") for k, v in (secret.get("data") or {}).items()
    }
    data.update(secret.get("stringData") or {})
    return data


def field_value(pod: Obj, path: str) -> str:
    """The downward API's fieldRef paths (pkg/kubelet/kubelet_pods.go podFieldSelectorRuntimeValue)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        return str((meta.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
        "status.hostIPs": ",".join(i.get("ip", "") for i in status.get("hostIPs") or []),
        "status.podIPs": ",".join(i.get("ip", "") for i in status.get("podIPs") or []),
    }
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f'{k}="{v}"' for k, v in items)
    return str(simple.get(path) or "")


def resource_value(pod: Obj, container: Obj, ref: Obj, allocatable: dict[str, Decimal]) -> str:
    """``resourceFieldRef``: limits fall back to node allocatable; values are rounded up by the divisor."""
    target = container
    if ref.get("containerName"):
        every = list((pod.get("spec") or {}).get("containers") or []) + list(
            (pod.get("spec") or {}).get("initContainers") or []
        )
        target = next((c for c in every if c.get("name") == ref["containerName"]), container)
    kind, _, resource = (ref.get("resource") or "").partition(".")
    values = (target.get("resources") or {}).get(kind) or {}
    raw = values.get(resource)
    value = quantities.try_parse(raw) if raw is not None else None
    if value is None:
        value = allocatable.get(resource, Decimal(0)) if kind == "limits" else Decimal(0)
    divisor = quantities.try_parse(ref.get("divisor") or "1") or Decimal(1)
    if resource == "cpu":
        return str(_ceil_div(value * 1000, divisor * 1000))
    return str(_ceil_div(value, divisor))


def _ceil_div(value: Decimal, divisor: Decimal) -> int:
    """``resourceFieldRef`` rounds up (convertResourceCPUToString / Memory use ceil)."""
    return math.ceil(value / divisor) if divisor else 0
