"""Create-time defaults of a Pod, as the apiserver's defaulting and admission plugins set them.

Clients read these back (``kubectl get -o yaml``, operators comparing specs), so every field a real
apiserver fills in is filled in here with the same value: SetDefaults_Pod/PodSpec/Container, the
ServiceAccount and DefaultTolerationSeconds admission plugins, and ``status`` from PrepareForCreate.
"""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.k8s import quantities

Obj = dict[str, Any]

_FILE_MODE = 420  # 0644, the default mode of projected files (configMap, secret, downwardAPI)
_DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def image_tag(image: str) -> tuple[str, str]:
    """(tag, digest) of an image reference; a reference with neither means tag ``latest``."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    if not tag and not digest:
        tag = "latest"
    return tag, digest


def default_pull_policy(image: str) -> str:
    tag, _ = image_tag(image)
    return "Always" if tag == "latest" else "IfNotPresent"


def apply_pod_defaults(pod: Obj, default_grace: int = 30) -> Obj:
    """Fill in what the apiserver defaults; never overwrites a value the client sent."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", default_grace)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = account
    spec["serviceAccount"] = account
    _default_tolerations(spec)
    for container in spec.get("initContainers") or []:
        _default_container(container)
    for container in spec.get("containers") or []:
        _default_container(container)
    for volume in spec.get("volumes") or []:
        _default_volume(volume)
    return pod


def initial_status(pod: Obj) -> Obj:
    """PrepareForCreate: a new pod is Pending and carries its QoS class."""
    return {"phase": "Pending", "qosClass": qos_class(pod.get("spec") or {})}


def qos_class(spec: Obj) -> str:
    """Guaranteed / Burstable / BestEffort from cpu and memory requests and limits (core/v1/helper/qos)."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        req = {k: v for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")}
        lim = {k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
        for name in req:
            if quantities.try_parse(req[name]):
                requests[name] = 1
        for name in lim:
            if quantities.try_parse(lim[name]):
                limits[name] = 1
        if set(lim) != {"cpu", "memory"}:
            guaranteed = False
        for name, value in req.items():
            if name in lim and quantities.try_parse(value) != quantities.try_parse(lim[name]):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_tolerations(spec: Obj) -> None:
    tolerations = spec.setdefault("tolerations", [])
    for default in _DEFAULT_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") == default["effect"] for t in tolerations
        ):
            tolerations.append(dict(default))


def _default_container(container: Obj) -> None:
    if container.get("image") and not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = default_pull_policy(container["image"])
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None:
            field_ref.setdefault("apiVersion", "v1")
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        if container.get(kind):
            _default_probe(container[kind])


def _default_probe(probe: Obj) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    if probe.get("httpGet") is not None:
        probe["httpGet"].setdefault("path", "/")
        probe["httpGet"].setdefault("scheme", "HTTP")


def _default_volume(volume: Obj) -> None:
    for kind in ("configMap", "secret", "downwardAPI", "projected"):
        if volume.get(kind) is not None:
            volume[kind].setdefault("defaultMode", _FILE_MODE)
    if volume.get("hostPath") is not None:
        volume["hostPath"].setdefault("type", "")
    if "emptyDir" in volume and volume["emptyDir"] is None:
        volume["emptyDir"] = {}
