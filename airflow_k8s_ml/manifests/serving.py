"""Online inference: Deployment + Service (+ HPA, PodDisruptionBudget, NetworkPolicy) from one InferenceSpec.

Why these choices:
- The selector is one label we own (``airflow-k8s-ml/inference: <name>``). Selectors are immutable, so nothing
  that changes between runs (run id, model URI) may be in it.
- Run labels go on the objects' metadata, never into the pod template: a new DAG run with the same model must
  not roll the pods (the rerun is a no-op). The model URI *is* in the template (env ``MODEL_URI`` and an
  annotation), so a new model is exactly what triggers a rollout.
- Rolling update defaults to ``maxSurge=1, maxUnavailable=0``: a ready replica serves at every moment.
- A startupProbe on the *readiness* path every second (``STARTUP_PROBE_PERIOD``): a pod is Ready about a
  second after its model is loaded instead of at the next readiness period (10 s), the kubelet runs the
  readiness probe the moment the startup probe succeeds (kubernetes#101738), and the steady-state probes
  keep their period. Measured on the nightly deploy (bench/deploy_phases.py): a pod whose model loads in
  1.7 s was Ready after 10.1 s without it; with two replicas rolled one at a time that was 20 of 21 s.
- The model URI labels and annotates the Deployment only. Service, HPA, PDB and NetworkPolicy do not
  depend on the model, so a new model changes (and writes) the Deployment alone.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.manifests.naming import ANNOTATION_PREFIX, merge_labels, object_meta, sanitize_label_value
from airflow_k8s_ml.manifests.pod import PodTemplate, build_pod_template
from airflow_k8s_ml.manifests.quantities import Quantity, format_quantity
from airflow_k8s_ml.manifests.serving_rules import (
    AUTOSCALING_DEFAULTS,
    DEFAULT_STARTUP_TIMEOUT,
    INFERENCE_DEFAULTS,
    INGRESS_DEFAULTS,
    REQUESTS_PER_SECOND_METRIC,
    check_autoscaling_fields,
    check_inference_fields,
    check_ingress_fields,
    check_server_name,
    initial_replicas,
)
from airflow_k8s_ml.manifests.validation import fail, store_checked

__all__ = [
    "CANARY_LABEL",
    "DEFAULT_STARTUP_TIMEOUT",
    "INFERENCE_CONTAINER",
    "MODEL_URI_LABEL",
    "SELECTOR_LABEL",
    "STARTUP_PROBE_PERIOD",
    "Autoscaling",
    "InferenceSpec",
    "IngressPolicy",
    "build_canary",
    "build_deployment",
    "build_hpa",
    "build_inference_objects",
    "build_network_policy",
    "build_pdb",
    "build_service",
    "canary_name",
    "canary_selector",
    "selector_labels",
    "strip_replicas",
]

SELECTOR_LABEL = f"{ANNOTATION_PREFIX}inference"
MODEL_URI_LABEL = f"{ANNOTATION_PREFIX}model-uri"
INFERENCE_CONTAINER = "server"
#: Seconds between startup probes: the smallest period Kubernetes allows, so readiness is seen within a
#: second of the model being loaded. Only until the first success; the steady probes use
#: ``probe_period_seconds``.
STARTUP_PROBE_PERIOD = 1


@dataclass(frozen=True, slots=True)
class Autoscaling:
    """autoscaling/v2 HPA: CPU utilisation (percent of the CPU *request*), the request rate per pod, and/or
    one other custom metric.

    ``target_requests_per_second`` scales on the ``Pods`` metric ``http_requests_per_second`` (the name a
    Prometheus adapter's rule conventionally gives ``rate(http_requests_total[...])``; the local cluster
    serves it from its service proxy's counts) with an ``AverageValue`` target per pod.
    ``autoscale_metric`` ("cpu", "rps", "both"; None: every target given) picks which given targets the HPA
    uses, so a DAG Param can switch between them. ``metric_type`` ``Pods`` reads another per-pod metric;
    ``External`` a metric not tied to pods (queue length). Both use an ``AverageValue`` target per replica.
    """

    max_replicas: int
    min_replicas: int = 1
    autoscale_metric: str | None = None
    target_cpu_utilization: int | None = None
    target_requests_per_second: Quantity | None = None
    metric_name: str | None = None
    metric_type: str = "Pods"
    metric_target: Quantity | None = None
    metric_selector: Mapping[str, str] = field(default_factory=dict)
    scale_down_stabilization_seconds: int | None = None

    def __post_init__(self) -> None:
        fields = ("max_replicas", *AUTOSCALING_DEFAULTS)
        store_checked(self, check_autoscaling_fields({name: getattr(self, name) for name in fields}))

    def metrics(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.target_cpu_utilization is not None:
            out.append(
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": self.target_cpu_utilization},
                    },
                }
            )
        if self.target_requests_per_second is not None:
            average = format_quantity(self.target_requests_per_second)
            out.append(
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": REQUESTS_PER_SECOND_METRIC},
                        "target": {"type": "AverageValue", "averageValue": average},
                    },
                }
            )
        if self.metric_name is not None and self.metric_target is not None:
            metric: dict[str, Any] = {"name": self.metric_name}
            if self.metric_selector:
                metric["selector"] = {"matchLabels": dict(self.metric_selector)}
            target = {"type": "AverageValue", "averageValue": format_quantity(self.metric_target)}
            key = self.metric_type.lower()
            out.append({"type": self.metric_type, key: {"metric": metric, "target": target}})
        return out


@dataclass(frozen=True, slots=True)
class IngressPolicy:
    """Allow ingress to the model server's port only from these sources (any of them); deny the rest.

    Namespaces are matched by their automatic ``kubernetes.io/metadata.name`` label; ``from_pod_labels``
    selects pods in the Deployment's own namespace. Note: smoke tests through the API server's service proxy
    come from the control plane; on clusters that enforce NetworkPolicy add its range to ``from_cidrs``.
    """

    from_namespaces: Sequence[str] = ()
    from_pod_labels: Mapping[str, str] = field(default_factory=dict)
    from_cidrs: Sequence[str] = ()

    def __post_init__(self) -> None:
        store_checked(self, check_ingress_fields({name: getattr(self, name) for name in INGRESS_DEFAULTS}))

    def peers(self) -> list[dict[str, Any]]:
        peers: list[dict[str, Any]] = [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
            for ns in self.from_namespaces
        ]
        if self.from_pod_labels:
            peers.append({"podSelector": {"matchLabels": dict(self.from_pod_labels)}})
        peers += [{"ipBlock": {"cidr": cidr}} for cidr in self.from_cidrs]
        return peers


@dataclass(frozen=True, slots=True)
class InferenceSpec:
    """A model server.

    ``replicas`` and ``autoscaling`` are exclusive: with an HPA it owns the count and the Deployment starts at
    ``min_replicas``. ``startup_timeout_seconds`` is the budget of the startupProbe (on the readiness path,
    every :data:`STARTUP_PROBE_PERIOD` s): a slow model load is not killed by the liveness probe, and a
    loaded one is Ready within a second. ``None`` leaves the startupProbe out (readiness is then only
    seen at the next ``probe_period_seconds``).
    """

    pod: PodTemplate
    model_uri: str
    replicas: int | None = None
    port: int = 8080
    service_port: int = 80
    readiness_path: str = "/healthz"
    liveness_path: str | None = None
    startup_timeout_seconds: int | None = DEFAULT_STARTUP_TIMEOUT
    probe_period_seconds: int = 10
    max_surge: int | str = 1
    max_unavailable: int | str = 0
    min_ready_seconds: int = 0
    progress_deadline_seconds: int = 600
    revision_history_limit: int = 10
    autoscaling: Autoscaling | None = None
    pdb_min_available: int | str | None = None
    network_policy: IngressPolicy | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.pod, PodTemplate):
            raise fail("pod", f"must be a PodTemplate, got {type(self.pod).__name__}")
        if self.autoscaling is not None and not isinstance(self.autoscaling, Autoscaling):
            raise fail("autoscaling", f"must be an Autoscaling, got {type(self.autoscaling).__name__}")
        if self.network_policy is not None and not isinstance(self.network_policy, IngressPolicy):
            raise fail(
                "network_policy", f"must be an IngressPolicy, got {type(self.network_policy).__name__}"
            )
        values = {name: getattr(self, name) for name in ("model_uri", *INFERENCE_DEFAULTS)}
        checked = check_inference_fields(values, requests=self.pod.requests, autoscaling=self._scaling())
        store_checked(self, checked)

    def _scaling(self) -> dict[str, Any] | None:
        if self.autoscaling is None:
            return None
        return {name: getattr(self.autoscaling, name) for name in ("max_replicas", *AUTOSCALING_DEFAULTS)}

    @property
    def initial_replicas(self) -> int:
        return initial_replicas(self.replicas, self._scaling())

    def probes(self) -> dict[str, dict[str, Any]]:
        def http_probe(path: str, period: int, failure_threshold: int = 3) -> dict[str, Any]:
            return {
                "httpGet": {"path": path, "port": "http"},
                "periodSeconds": period,
                "failureThreshold": failure_threshold,
            }

        probes = {"readinessProbe": http_probe(self.readiness_path, self.probe_period_seconds)}
        if self.liveness_path is not None:
            probes["livenessProbe"] = http_probe(self.liveness_path, self.probe_period_seconds)
        if self.startup_timeout_seconds is not None:
            # The readiness path, not the liveness one: "started" must mean "model loaded", or the startup
            # probe passes at once and readiness is again only seen a whole period later.
            threshold = max(1, math.ceil(self.startup_timeout_seconds / STARTUP_PROBE_PERIOD))
            probes["startupProbe"] = http_probe(self.readiness_path, STARTUP_PROBE_PERIOD, threshold)
        return probes


def selector_labels(name: str) -> dict[str, str]:
    """The immutable selector shared by Deployment, Service, PDB and NetworkPolicy."""
    return {SELECTOR_LABEL: name}


def _meta(
    kind: str, spec: InferenceSpec, name: str, namespace: str, labels: Any, annotations: Any
) -> dict[str, Any]:
    """Metadata of one object; only the Deployment names the model (the others do not depend on it)."""
    check_server_name(name)
    ours = {**dict(labels or {}), **selector_labels(name)}
    notes = {**spec.annotations, **dict(annotations or {})}
    if kind == "Deployment":
        ours[MODEL_URI_LABEL] = sanitize_label_value(spec.model_uri)
        notes[MODEL_URI_LABEL] = spec.model_uri
    return object_meta(kind, name, namespace, merge_labels(ours, spec.labels, "labels"), notes)


def build_deployment(
    spec: InferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """apps/v1 Deployment with a RollingUpdate strategy, http probes and ``MODEL_URI`` in the env."""
    metadata = _meta("Deployment", spec, name, namespace, labels, annotations)
    template_labels = {**selector_labels(name), MODEL_URI_LABEL: sanitize_label_value(spec.model_uri)}
    template = build_pod_template(
        spec.pod,
        labels=template_labels,
        annotations={MODEL_URI_LABEL: spec.model_uri},
        container_name=INFERENCE_CONTAINER,
        extra_env={"MODEL_URI": spec.model_uri, "PORT": str(spec.port)},
        ports=[{"name": "http", "containerPort": spec.port, "protocol": "TCP"}],
        probes=spec.probes(),
    )
    body = {
        "replicas": spec.initial_replicas,
        "selector": {"matchLabels": selector_labels(name)},
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": spec.max_surge, "maxUnavailable": spec.max_unavailable},
        },
        "minReadySeconds": spec.min_ready_seconds,
        "progressDeadlineSeconds": spec.progress_deadline_seconds,
        "revisionHistoryLimit": spec.revision_history_limit,
        "template": template,
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": body}


def build_service(
    spec: InferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """ClusterIP Service with one port named ``http`` (the service proxy path uses ``<name>:http``)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta("Service", spec, name, namespace, labels, annotations),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(name),
            "ports": [{"name": "http", "port": spec.service_port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def build_hpa(
    spec: InferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """autoscaling/v2 HorizontalPodAutoscaler targeting the Deployment, or None without ``autoscaling``."""
    scaling = spec.autoscaling
    if scaling is None:
        return None
    body: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "minReplicas": scaling.min_replicas,
        "maxReplicas": scaling.max_replicas,
        "metrics": scaling.metrics(),
    }
    if scaling.scale_down_stabilization_seconds is not None:
        body["behavior"] = {
            "scaleDown": {"stabilizationWindowSeconds": scaling.scale_down_stabilization_seconds}
        }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta("HorizontalPodAutoscaler", spec, name, namespace, labels, annotations),
        "spec": body,
    }


def build_pdb(
    spec: InferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """policy/v1 PodDisruptionBudget (``minAvailable``), or None without ``pdb_min_available``."""
    if spec.pdb_min_available is None:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta("PodDisruptionBudget", spec, name, namespace, labels, annotations),
        "spec": {"minAvailable": spec.pdb_min_available, "selector": {"matchLabels": selector_labels(name)}},
    }


def build_network_policy(
    spec: InferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """networking.k8s.io/v1 NetworkPolicy admitting only the allowed sources to the http port."""
    policy = spec.network_policy
    if policy is None:
        return None
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta("NetworkPolicy", spec, name, namespace, labels, annotations),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(name)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": policy.peers(), "ports": [{"protocol": "TCP", "port": spec.port}]}],
        },
    }


def build_inference_objects(
    spec: InferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every object, in apply order: NetworkPolicy (before pods exist), Deployment, Service, HPA, PDB."""
    builders = (build_network_policy, build_deployment, build_service, build_hpa, build_pdb)
    objects = [builder(spec, name, namespace, labels, annotations) for builder in builders]
    return [obj for obj in objects if obj is not None]


#: The label that tells a canary's pods from the stable ones (both carry the Service's selector label).
CANARY_LABEL = f"{ANNOTATION_PREFIX}canary"
#: What the canary Deployment's name adds to the stable one's.
CANARY_SUFFIX = "-canary"


def canary_name(name: str) -> str:
    """The canary Deployment's name beside the stable ``name``."""
    return f"{name}{CANARY_SUFFIX}"


def canary_selector(name: str) -> dict[str, str]:
    """The canary's pods (and its metrics' selector): the Service's label plus :data:`CANARY_LABEL`."""
    return {**selector_labels(name), CANARY_LABEL: name}


def build_canary(deployment: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    """The canary Deployment from the *new* rendered stable one: the same pod template (model, record,
    probes) plus :data:`CANARY_LABEL`, ``replicas`` pods, its own name and selector.

    Its pods keep the Service's selector label, so the Service spreads requests over stable and canary
    pods alike (traffic in proportion to ready pods: the Kubernetes docs' canary pattern). The stable
    Deployment's selector matches them too; Deployments and ReplicaSets only manage pods they own by
    controller reference, so neither touches the other's pods."""
    out = copy.deepcopy(dict(deployment))
    name = out["metadata"]["name"]
    out["metadata"]["name"] = canary_name(name)
    out["metadata"]["labels"] = {**(out["metadata"].get("labels") or {}), CANARY_LABEL: name}
    spec = out["spec"]
    spec["replicas"] = replicas
    spec["selector"] = {"matchLabels": canary_selector(name)}
    template_meta = spec["template"].setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), CANARY_LABEL: name}
    return out


def strip_replicas(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without ``spec.replicas``: patch an HPA-managed Deployment with this, or every re-apply would
    reset the HPA's current scale to ``min_replicas``."""
    out = copy.deepcopy(dict(deployment))
    out.get("spec", {}).pop("replicas", None)
    return out
