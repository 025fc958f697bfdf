"""The resource types the local cluster serves: one table, read by discovery, routing, storage and OpenAPI.

Keeping every fact about a resource (group, version, kind, scope, verbs, short names, subresources, the
default garbage-collection policy) in one row means discovery cannot drift from what the handlers accept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ("status",)
    # What DELETE does to dependents when the client sends no propagationPolicy (upstream per-kind default).
    default_propagation: str = "Background"
    # Another served version whose objects are stored under this row (e.g. autoscaling/v1 HPA -> v2).
    storage_version: str | None = None
    categories: tuple[str, ...] = ("all",)
    # The apiserver's rule for metadata.name (naming.py): "subdomain" (DNS-1123 subdomain), "label" (DNS-1123
    # label: the name becomes a hostname or label value) or "dns1035" (Services: a DNS name). CronJobs are
    # subdomains further limited to 52 characters by their admission; PyTorchJobs get the webhook's DNS-1035
    # rule in their admission, with its own message.
    name_format: str = "subdomain"
    # No objects of its own: only the subresources a controller registers are served (an aggregated API
    # such as Kueue's visibility.kueue.x-k8s.io, whose ``localqueues`` exist only as a path to
    # ``pendingworkloads``). Discovery lists it with no verbs, as the aggregated API server does.
    virtual: bool = False
    # Discovery's singularName when it is not the kind's lower case (a virtual row's kind is its answer's).
    singular_name: str = ""
    # A deprecated version's warning, sent with every answer to a request at it (a CRD version's
    # ``deprecationWarning``, which the apiserver sends as a ``299`` Warning header).
    deprecation_warning: str = ""
    # The verbs discovery lists for a virtual row whose reads a controller serves (metrics.k8s.io).
    verbs: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.singular_name or self.kind.lower()

    @property
    def storage_key(self) -> tuple[str, str]:
        """Objects are stored once per (group, plural), whatever version they are served at."""
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# Kueue (kubernetes-sigs/kueue config/components/crd): short names as the CRDs declare them. Since Kueue 0.16
# v1beta2 is the storage version and v1beta1 is served deprecated, converted by Kueue's conversion webhook
# (apis/kueue/v1beta1/*_conversion.go; here controllers/kueue/convert.py); ClusterSettings.kueue_v1beta2=False
# serves v1beta1 alone, as Kueue < 0.16 did (server.py, discovery.py).
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
KUEUE_STORAGE_VERSION = "v1beta2"
#: The CRDs' ``deprecationWarning`` of v1beta1 (``+kubebuilder:deprecatedversion:warning``).
KUEUE_V1BETA1_WARNING = "This version is deprecated. Use v1beta2 instead."
_KUEUE_KINDS: tuple[ResourceType, ...] = (
    ResourceType(
        KUEUE_GROUP,
        KUEUE_STORAGE_VERSION,
        "resourceflavors",
        "ResourceFlavor",
        namespaced=False,
        short_names=("flavor", "flavors", "rf"),
        subresources=(),
        categories=(),
    ),
    ResourceType(
        KUEUE_GROUP,
        KUEUE_STORAGE_VERSION,
        "clusterqueues",
        "ClusterQueue",
        namespaced=False,
        short_names=("cq",),
        categories=(),
    ),
    ResourceType(
        KUEUE_GROUP,
        KUEUE_STORAGE_VERSION,
        "localqueues",
        "LocalQueue",
        short_names=("queue", "queues", "lq"),
        categories=(),
    ),
    ResourceType(
        KUEUE_GROUP, KUEUE_STORAGE_VERSION, "workloads", "Workload", short_names=("wl",), categories=()
    ),
    ResourceType(
        KUEUE_GROUP,
        KUEUE_STORAGE_VERSION,
        "workloadpriorityclasses",
        "WorkloadPriorityClass",
        namespaced=False,
        subresources=(),
        categories=(),
    ),
    # Kueue's on-demand visibility API (apis/visibility/v1beta2 and v1beta1, the same types; feature
    # VisibilityOnDemand): GET ``.../pendingworkloads`` only (controllers/kueue/visibility.py). As upstream's
    # CqREST/LqREST: the kind is what their storage's New() returns, the singular name theirs, and no verbs.
    ResourceType(
        KUEUE_VISIBILITY_GROUP,
        KUEUE_STORAGE_VERSION,
        "clusterqueues",
        "PendingWorkloadsSummary",
        namespaced=False,
        subresources=("pendingworkloads",),
        categories=(),
        virtual=True,
        singular_name="clusterqueue",
    ),
    ResourceType(
        KUEUE_VISIBILITY_GROUP,
        KUEUE_STORAGE_VERSION,
        "localqueues",
        "PendingWorkloadsSummary",
        subresources=("pendingworkloads",),
        categories=(),
        virtual=True,
        singular_name="localqueue",
    ),
)


def _kueue_v1beta1(rt: ResourceType) -> ResourceType:
    """The v1beta1 row of a v1beta2 one, stored as v1beta2: the CRDs' v1beta1 warns, the visibility
    API's does not."""
    warning = KUEUE_V1BETA1_WARNING if rt.group == KUEUE_GROUP else ""
    return replace(rt, version="v1beta1", storage_version=rt.version, deprecation_warning=warning)


_KUEUE_ROWS: tuple[ResourceType, ...] = (*_KUEUE_KINDS, *(_kueue_v1beta1(rt) for rt in _KUEUE_KINDS))

# The metrics APIs (controllers/metrics): metrics.k8s.io as metrics-server serves it (PodMetrics and
# NodeMetrics, get and list) and custom.metrics.k8s.io as a Prometheus adapter serves it (one discovery row
# per ``pods/<metric>``, kind MetricValueList, get only). Nothing is stored: each answer is measured.
METRICS_GROUP = "metrics.k8s.io"
CUSTOM_METRICS_GROUP = "custom.metrics.k8s.io"
#: The pods metrics the custom metrics API serves, from the service proxy's counts.
CUSTOM_POD_METRICS = ("http_requests_per_second", "http_requests_total", "http_request_errors_total")
_METRICS_ROWS: tuple[ResourceType, ...] = (
    ResourceType(
        METRICS_GROUP,
        "v1beta1",
        "pods",
        "PodMetrics",
        subresources=(),
        categories=(),
        virtual=True,
        verbs=("get", "list"),
    ),
    ResourceType(
        METRICS_GROUP,
        "v1beta1",
        "nodes",
        "NodeMetrics",
        namespaced=False,
        subresources=(),
        categories=(),
        virtual=True,
        verbs=("get", "list"),
    ),
    ResourceType(
        CUSTOM_METRICS_GROUP,
        "v1beta2",
        "pods",
        "MetricValueList",
        subresources=CUSTOM_POD_METRICS,
        categories=(),
        virtual=True,
    ),
)


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        categories=(),
        name_format="label",
    ),
    ResourceType("", "v1", "pods", "Pod", short_names=("po",), subresources=("status", "log", "eviction")),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        short_names=("svc",),
        subresources=("status", "proxy"),
        name_format="dns1035",
    ),
    ResourceType("", "v1", "endpoints", "Endpoints", short_names=("ep",), subresources=(), categories=()),
    ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", subresources=(), categories=()),
    ResourceType("", "v1", "events", "Event", short_names=("ev",), subresources=(), categories=()),
    ResourceType("", "v1", "configmaps", "ConfigMap", short_names=("cm",), subresources=(), categories=()),
    ResourceType("", "v1", "secrets", "Secret", subresources=(), categories=()),
    ResourceType(
        "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), categories=()
    ),
    ResourceType(
        "", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",), subresources=(), categories=()
    ),
    ResourceType("", "v1", "nodes", "Node", namespaced=False, short_names=("no",), categories=()),
    ResourceType("batch", "v1", "jobs", "Job", default_propagation="Orphan"),
    ResourceType("batch", "v1", "cronjobs", "CronJob", short_names=("cj",)),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        subresources=("status", "scale"),
        name_format="label",
    ),
    ResourceType(
        "apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), subresources=("status", "scale")
    ),
    ResourceType(
        "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short_names=("hpa",)
    ),
    ResourceType(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short_names=("hpa",),
        storage_version="v2",
    ),
    ResourceType(
        "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",), categories=()
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        short_names=("netpol",),
        subresources=(),
        categories=(),
    ),
    ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", categories=("all", "kubeflow")),
    ResourceType("kubeflow.org", "v1", "tfjobs", "TFJob", categories=("all", "kubeflow")),
    # Kubeflow Trainer v2 and JobSet: their CRDs declare no short names and no categories.
    ResourceType("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", categories=()),
    ResourceType(
        "trainer.kubeflow.org",
        "v1alpha1",
        "trainingruntimes",
        "TrainingRuntime",
        subresources=(),
        categories=(),
    ),
    ResourceType(
        "trainer.kubeflow.org",
        "v1alpha1",
        "clustertrainingruntimes",
        "ClusterTrainingRuntime",
        namespaced=False,
        subresources=(),
        categories=(),
    ),
    ResourceType("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", categories=()),
    *_KUEUE_ROWS,
    *_METRICS_ROWS,
)

# The kind namespaced objects live in: the store refuses a namespaced object whose namespace does not exist
# or is terminating, and deleting one empties it. The store learns it from here, not by name.
NAMESPACES: ResourceType = next(rt for rt in RESOURCE_TYPES if rt.group == "" and rt.plural == "namespaces")

# Preferred version per group, in the order /apis lists groups.
PREFERRED_VERSIONS: dict[str, str] = {
    "batch": "v1",
    "apps": "v1",
    "autoscaling": "v2",
    "policy": "v1",
    "networking.k8s.io": "v1",
    "discovery.k8s.io": "v1",
    "kubeflow.org": "v1",
    "trainer.kubeflow.org": "v1alpha1",
    "jobset.x-k8s.io": "v1alpha2",
    "kueue.x-k8s.io": "v1beta2",
    "visibility.kueue.x-k8s.io": "v1beta2",
}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    """The row serving ``plural`` at ``group/version``, or None when the URL names nothing we serve."""
    for rt in RESOURCE_TYPES:
        if rt.group == group and rt.version == version and rt.plural == plural:
            return rt
    return None


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    for rt in RESOURCE_TYPES:
        if rt.api_version == api_version and rt.kind == kind:
            return rt
    return None


#: (group, version) pairs a cluster's settings leave out (answered 404 and absent from discovery).
Unserved = frozenset[tuple[str, str]]


def unserved_versions(kueue_v1beta2: bool) -> Unserved:
    """What a cluster does not serve: Kueue's v1beta2 groups unless it plays a Kueue >= 0.16."""
    if kueue_v1beta2:
        return frozenset()
    return frozenset({(KUEUE_GROUP, KUEUE_STORAGE_VERSION), (KUEUE_VISIBILITY_GROUP, KUEUE_STORAGE_VERSION)})


def deprecation_warning(rt: ResourceType, unserved: Unserved) -> str:
    """The warning a request at ``rt`` gets: none where the version it points to is not served (Kueue
    < 0.16 did not deprecate v1beta1)."""
    if not rt.deprecation_warning or (rt.group, rt.storage_version) in unserved:
        return ""
    return rt.deprecation_warning


def group_versions(unserved: Unserved = frozenset()) -> dict[str, list[str]]:
    """Served versions per named group (core excluded), preferred version first."""
    result: dict[str, list[str]] = {}
    for rt in RESOURCE_TYPES:
        if (rt.group, rt.version) in unserved:
            continue
        if rt.group and rt.version not in result.setdefault(rt.group, []):
            result[rt.group].append(rt.version)
    for group, versions in result.items():
        preferred = PREFERRED_VERSIONS.get(group, versions[0])
        preferred = preferred if preferred in versions else versions[0]
        versions.sort(key=lambda v: v != preferred)
    return result


def served_at(group: str, version: str) -> list[ResourceType]:
    return [rt for rt in RESOURCE_TYPES if rt.group == group and rt.version == version]
