"""Names, labels, condition types and reasons of kueue.x-k8s.io/v1beta1 (kubernetes-sigs/kueue
apis/kueue/v1beta1 and pkg/controller/constants), in one place so messages cannot drift between modules."""

from __future__ import annotations

from typing import Any

from ..owned import served

Obj = dict[str, Any]

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
CONTROLLER_NAME = "kueue-admission"

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"

RESOURCE_FLAVORS = served(GROUP, VERSION, "resourceflavors")
CLUSTER_QUEUES = served(GROUP, VERSION, "clusterqueues")
LOCAL_QUEUES = served(GROUP, VERSION, "localqueues")
WORKLOADS = served(GROUP, VERSION, "workloads")
PRIORITY_CLASSES = served(GROUP, VERSION, "workloadpriorityclasses")

# The on-demand visibility API (apis/visibility/v1beta1): paths to ``pendingworkloads`` only.
VISIBILITY_GROUP = f"visibility.{GROUP}"
VISIBILITY_API_VERSION = f"{VISIBILITY_GROUP}/{VERSION}"
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
