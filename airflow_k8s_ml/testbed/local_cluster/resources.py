"""The resource types the local cluster serves: one table, read by discovery, routing, storage and OpenAPI.

Keeping every fact about a resource (group, version, kind, scope, verbs, short names, subresources, the
default garbage-collection policy) in one row means discovery cannot drift from what the handlers accept.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    # Kueue (kubernetes-sigs/kueue config/components/crd): short names as the CRDs declare them.
    ResourceType(
        "kueue.x-k8s.io",
        "v1beta1",
        "resourceflavors",
        "ResourceFlavor",
        namespaced=False,
        short_names=("flavor", "flavors", "rf"),
        subresources=(),
        categories=(),
    ),
    ResourceType(
        "kueue.x-k8s.io",
        "v1beta1",
        "clusterqueues",
        "ClusterQueue",
        namespaced=False,
        short_names=("cq",),
        categories=(),
    ),
    ResourceType(
        "kueue.x-k8s.io",
        "v1beta1",
        "localqueues",
        "LocalQueue",
        short_names=("queue", "queues", "lq"),
        categories=(),
    ),
    ResourceType("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", short_names=("wl",), categories=()),
    # Kueue's on-demand visibility API (apis/visibility/v1beta1, feature VisibilityOnDemand): GET
    # ``.../pendingworkloads`` only (controllers/kueue/visibility.py). As upstream's CqREST/LqREST: the
    # kind is what their storage's New() returns, the singular name theirs, and no verbs.
    ResourceType(
        "visibility.kueue.x-k8s.io",
        "v1beta1",
        "clusterqueues",
        "PendingWorkloadsSummary",
        namespaced=False,
        subresources=("pendingworkloads",),
        categories=(),
        virtual=True,
        singular_name="clusterqueue",
    ),
    ResourceType(
        "visibility.kueue.x-k8s.io",
        "v1beta1",
        "localqueues",
        "PendingWorkloadsSummary",
        subresources=("pendingworkloads",),
        categories=(),
        virtual=True,
        singular_name="localqueue",
    ),
    ResourceType(
        "kueue.x-k8s.io",
        "v1beta1",
        "workloadpriorityclasses",
        "WorkloadPriorityClass",
        namespaced=False,
        subresources=(),
        categories=(),
    ),
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
    "kueue.x-k8s.io": "v1beta1",
    "visibility.kueue.x-k8s.io": "v1beta1",
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


def group_versions() -> dict[str, list[str]]:
    """Served versions per named group (core excluded), preferred version first."""
    result: dict[str, list[str]] = {}
    for rt in RESOURCE_TYPES:
        if rt.group and rt.version not in result.setdefault(rt.group, []):
            result[rt.group].append(rt.version)
    for group, versions in result.items():
        preferred = PREFERRED_VERSIONS.get(group, versions[0])
        versions.sort(key=lambda v: v != preferred)
    return result


def served_at(group: str, version: str) -> list[ResourceType]:
    return [rt for rt in RESOURCE_TYPES if rt.group == group and rt.version == version]
