"""Names, labels, reasons and messages of jobset.x-k8s.io/v1alpha2, as kubernetes-sigs/jobset spells them
(api/jobset/v1alpha2/jobset_types.go, pkg/constants, pkg/util/placement).

One module so the webhook, the Job builder, the policies and the controller cannot disagree on a key.
"""

from __future__ import annotations

import hashlib
from typing import Any

Obj = dict[str, Any]

GROUP, VERSION, PLURAL, KIND = "jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"
API_VERSION = f"{GROUP}/{VERSION}"
CONTROLLER_NAME = "jobset-controller"
MANAGER = "jobset.sigs.k8s.io/jobset-controller"  # the reserved spec.managedBy value
WEBHOOK_NAME = "vjobset.kb.io"

# Labels and annotations put on child Jobs and their pod templates.
JOBSET_NAME_KEY = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_KEY = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_NAME_KEY = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS_KEY = "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS_KEY = "jobset.sigs.k8s.io/global-replicas"
JOB_INDEX_KEY = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX_KEY = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
GROUP_NAME_KEY = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS_KEY = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX_KEY = "jobset.sigs.k8s.io/job-group-index"
RESTARTS_KEY = "jobset.sigs.k8s.io/restart-attempt"
DEFAULT_GROUP = "default"  # ReplicatedJob.groupName's CRD default

# Condition types.
COMPLETED, FAILED, SUSPENDED = "Completed", "Failed", "Suspended"
RESTARTING = "RestartingJobSet"
STARTUP_IN_PROGRESS, STARTUP_COMPLETED = "StartupPolicyInProgress", "StartupPolicyCompleted"

# Reasons and messages (pkg/constants/constants.go).
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
ALL_JOBS_COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAIL_JOBSET_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
RESTART_JOBSET_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
RESTART_IGNORE_MAX_ACTION = (
    "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
)
SUSPENDED_JOBS = ("SuspendedJobs", "jobset is suspended")
RESUMED_JOBS = ("ResumeJobs", "jobset is resumed")
IN_ORDER_IN_PROGRESS = ("InOrderStartupPolicyInProgress", "in order startup policy is in progress")
IN_ORDER_COMPLETED = ("InOrderStartupPolicyCompleted", "in order startup policy has completed")
RESTARTING_DEFAULT_POLICY = "DefaultFailurePolicy"
RESTARTING_RULE_FORMAT = "FailurePolicy_{}"
RESTARTING_JOBS_READY = ("JobsReady", "all jobs are ready")
RESTARTING_JOBSET_FAILED = ("JobSetFailed", "jobset failed")
RESTARTING_JOBSET_COMPLETED = ("JobSetCompleted", "jobset completed successfully")
RESTARTING_JOBSET_SUSPENDED = ("JobSetSuspended", "jobset is suspended")
JOB_CREATION_FAILED = "JobCreationFailed"
HEADLESS_SERVICE_CREATION_FAILED = "HeadlessServiceCreationFailed"


def job_name(jobset: str, replicated_job: str, index: int) -> str:
    """``placement.GenJobName``: ``<jobset>-<replicatedJob>-<index>``."""
    return f"{jobset}-{replicated_job}-{index}"


def pod_hostname(jobset: str, replicated_job: str, job_index: int, pod_index: int) -> str:
    """``placement.GenPodName`` (the Indexed Job's pod hostname ``<job>-<completion index>``)."""
    return f"{job_name(jobset, replicated_job, job_index)}-{pod_index}"


def job_hash_key(namespace: str, name: str) -> str:
    """``jobHashKey``: SHA-1 of ``<namespace>/<job name>``, hex."""
    return hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()


def replicated_jobs(js: Obj) -> list[Obj]:
    return list((js.get("spec") or {}).get("replicatedJobs") or [])


def replicas(rjob: Obj) -> int:
    value = rjob.get("replicas")
    return int(value) if value is not None else 1


def suspended(js: Obj) -> bool:
    return (js.get("spec") or {}).get("suspend") is True


def dns_hostnames_enabled(js: Obj) -> bool:
    return ((js.get("spec") or {}).get("network") or {}).get("enableDNSHostnames") is True


def subdomain(js: Obj) -> str:
    """``GetSubdomain``: ``spec.network.subdomain``, else the JobSet's name."""
    return ((js.get("spec") or {}).get("network") or {}).get("subdomain") or js["metadata"]["name"]


def managed_here(js: Obj) -> bool:
    manager = (js.get("spec") or {}).get("managedBy")
    return manager in (None, "", MANAGER)
