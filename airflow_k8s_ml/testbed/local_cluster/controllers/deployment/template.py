"""Pod templates of Deployments and ReplicaSets: defaults, the ``pod-template-hash``, semantic equality.

Upstream hashes the Go struct of the template (``controller.ComputeHash``: FNV-32a over a spew dump, then
``rand.SafeEncodeString`` of the decimal sum). We cannot reproduce a Go spew dump, so we hash a canonical
JSON form of the *normalized* template instead: same alphabet, same length, same stability (equal templates
give equal hashes), different digits. Normalization mirrors what a Go round trip erases: ``null`` fields,
empty maps and lists (``resources: {}``, ``creationTimestamp: null`` from kubectl), so a template that went
through ``kubectl rollout undo`` compares equal to the one it came from, like ``EqualIgnoreHash`` does.
"""

from __future__ import annotations

import copy
import json
import struct
from typing import Any

from ...kubelet.defaults import default_pull_policy

Obj = dict[str, Any]

HASH_LABEL = "pod-template-hash"
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery rand.SafeEncodeString
_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619


def normalize(value: Any) -> Any:
    """Drop what a Go decode/encode cycle cannot tell apart from absence: nulls, empty maps and lists."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = normalize(item)
            if item is None or item == {} or item == []:
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [normalize(item) for item in value]
    return value


def without_hash(template: Obj | None) -> Obj:
    """A copy of ``template`` without the ``pod-template-hash`` label (upstream ``EqualIgnoreHash``)."""
    result = copy.deepcopy(template or {})
    labels = (result.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return result


def equal_ignore_hash(left: Obj | None, right: Obj | None) -> bool:
    return normalize(without_hash(left)) == normalize(without_hash(right))


def _fnv32a(data: bytes, state: int = _FNV_OFFSET) -> int:
    for byte in data:
        state = ((state ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return state


def safe_encode(text: str) -> str:
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in text)


def template_hash(template: Obj, collision_count: int | None = None) -> str:
    """``controller.ComputeHash``: the value of the ``pod-template-hash`` label for ``template``."""
    canonical = json.dumps(normalize(without_hash(template)), sort_keys=True, separators=(",", ":"))
    state = _fnv32a(canonical.encode())
    if collision_count is not None:
        # binary.LittleEndian.PutUint32 into an 8-byte buffer: 4 bytes of count, 4 zero bytes.
        state = _fnv32a(struct.pack("<I", collision_count & 0xFFFFFFFF) + b"\0\0\0\0", state)
    return safe_encode(str(state))


def with_hash(template: Obj, pod_hash: str) -> Obj:
    """The template with the hash label added (``CloneAndAddLabel``)."""
    result = copy.deepcopy(template)
    meta = result.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), HASH_LABEL: pod_hash}
    return result


def selector_with_hash(selector: Obj | None, pod_hash: str) -> Obj:
    """``CloneSelectorAndAddLabel``: the selector also requires the hash label."""
    result = copy.deepcopy(selector or {})
    result["matchLabels"] = {**(result.get("matchLabels") or {}), HASH_LABEL: pod_hash}
    return result


# -- defaulting ---------------------------------------------------------------------------------------
def apply_template_defaults(template: Obj) -> None:
    """``SetDefaults_PodSpec`` and friends as they apply to a *template* (no service account, tolerations
    or priority: those come from admission plugins that only see pods). Clients read these back."""
    meta = template.get("metadata")
    if isinstance(meta, dict):
        for key in [k for k, v in meta.items() if v is None]:
            del meta[key]  # kubectl sends "creationTimestamp": null inside templates
    spec = template.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            _container_defaults(container)
    for volume in spec.get("volumes") or []:
        _volume_defaults(volume)


def _container_defaults(container: Obj) -> None:
    if container.get("image") and not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = default_pull_policy(container["image"])
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if container.get("resources") is None:
        container["resources"] = {}
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = container.get(kind)
        if isinstance(probe, dict):
            _probe_defaults(probe)


def _probe_defaults(probe: Obj) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    http_get = probe.get("httpGet")
    if isinstance(http_get, dict):
        http_get.setdefault("path", "/")
        http_get.setdefault("scheme", "HTTP")


def _volume_defaults(volume: Obj) -> None:
    for kind in ("configMap", "secret", "downwardAPI", "projected"):
        if isinstance(volume.get(kind), dict):
            volume[kind].setdefault("defaultMode", 420)
    if "emptyDir" in volume and volume["emptyDir"] is None:
        volume["emptyDir"] = {}
