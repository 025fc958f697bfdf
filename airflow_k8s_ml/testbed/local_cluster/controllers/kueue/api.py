"""Names, labels, condition types and reasons of kueue.x-k8s.io (kubernetes-sigs/kueue apis/kueue/v1beta2,
the storage version the controllers work on, and pkg/controller/constants), in one place so messages cannot
drift between modules. v1beta1 is served too, converted (convert.py)."""

from __future__ import annotations

from typing import Any

from ..owned import served

Obj = dict[str, Any]

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
V1BETA1 = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
CONTROLLER_NAME = "kueue-admission"

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: v1beta1's ``spec.priorityClassSource`` values; v1beta2 says ``spec.priorityClassRef`` {group, kind, name}.
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"
WORKLOAD_PRIORITY_CLASS_REF = {"group": GROUP, "kind": "WorkloadPriorityClass"}
POD_PRIORITY_CLASS_REF = {"group": "scheduling.k8s.io", "kind": "PriorityClass"}

RESOURCE_FLAVORS = served(GROUP, VERSION, "resourceflavors")
CLUSTER_QUEUES = served(GROUP, VERSION, "clusterqueues")
LOCAL_QUEUES = served(GROUP, VERSION, "localqueues")
WORKLOADS = served(GROUP, VERSION, "workloads")
PRIORITY_CLASSES = served(GROUP, VERSION, "workloadpriorityclasses")

# The on-demand visibility API (apis/visibility/v1beta2, and v1beta1 at the same paths): paths to
# ``pendingworkloads`` only.
VISIBILITY_GROUP = f"visibility.{GROUP}"
VISIBILITY_CLUSTER_QUEUES = served(VISIBILITY_GROUP, VERSION, "clusterqueues")
VISIBILITY_LOCAL_QUEUES = served(VISIBILITY_GROUP, VERSION, "localqueues")
PENDING_WORKLOADS = "pendingworkloads"
#: ``constants.DefaultPendingWorkloadsLimit``.
DEFAULT_PENDING_LIMIT = 1000

# Workload condition types (workload_types.go).
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
PODS_READY = "PodsReady"
EVICTED = "Evicted"
FINISHED = "Finished"
REQUEUED = "Requeued"

# Reasons and messages.
REASON_PENDING = "Pending"
REASON_INADMISSIBLE = "Inadmissible"
REASON_QUOTA_RESERVED = "QuotaReserved"
REASON_ADMITTED = "Admitted"
REASON_NO_RESERVATION = "NoReservation"
REASON_PREEMPTED = "Preempted"
REASON_SUCCEEDED = "Succeeded"
REASON_FAILED = "Failed"
REASON_PODS_READY = "PodsReady"
REASON_WAIT_FOR_START = "WaitForStart"
ADMITTED_MESSAGE = "The workload is admitted"
NO_RESERVATION_MESSAGE = "The workload has no reservation"
PODS_READY_MESSAGE = "All pods reached readiness and the workload is running"
PODS_NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
IN_CLUSTER_QUEUE_REASON = "prioritization in the ClusterQueue"

STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"
LOWER_PRIORITY = "LowerPriority"


def quota_reserved_message(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


def preempted_message(preemptor: Obj) -> str:
    """``preemption.go``: who the room was made for, and why (here always priority inside the queue)."""
    meta = preemptor["metadata"]
    job_uid = (meta.get("labels") or {}).get(JOB_UID_LABEL, "UNKNOWN")
    return (
        f"Preempted to accommodate a workload (UID: {meta.get('uid')}, JobUID: {job_uid}) "
        f"due to {IN_CLUSTER_QUEUE_REASON}"
    )
