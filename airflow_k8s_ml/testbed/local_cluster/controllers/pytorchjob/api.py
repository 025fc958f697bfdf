"""Names, labels and small spec readers of kubeflow.org/v1 PyTorchJob, as the training operator spells them.

One module so the admission, the pod/service builders, the status rules and the controller cannot disagree
on a label key or a default (kubeflow/training-operator release-1.9: pkg/apis/kubeflow.org/v1,
pkg/controller.v1/common, pkg/controller.v1/pytorch).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

KIND = "PyTorchJob"
API_VERSION = "kubeflow.org/v1"
CONTROLLER_NAME = "pytorchjob-controller"
# ValidatingWebhookConfiguration entry name: it prefixes every admission denial message.
WEBHOOK_NAME = "validator.pytorchjob.training-operator.kubeflow.org"

MASTER = "Master"
WORKER = "Worker"
REPLICA_TYPES = (MASTER, WORKER)  # deterministic order (Go iterates the map at random)

CONTAINER_NAME = "pytorch"
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
DEFAULT_RESTART_POLICY = "OnFailure"
DEFAULT_NPROC_PER_NODE = "auto"
CLEAN_POD_POLICY_NONE = "None"

# managedBy values the 1.9 webhook accepts; any other manager's jobs are left alone by this controller.
KUBEFLOW_MANAGER = "kubeflow.org/training-operator"
MULTIKUEUE_MANAGER = "kueue.x-k8s.io/multikueue"

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


def replica_name(job_name: str, rtype: str, index: int) -> str:
    """``<job>-<type lowercased>-<index>``: pod and headless Service share it (``replicaName``)."""
    return f"{job_name}-{rtype.lower()}-{index}".replace("/", "-")


def job_labels(job_name: str) -> dict[str, str]:
    """``GenLabels``: what every pod and service of the job carries."""
    return {OPERATOR_NAME_LABEL: CONTROLLER_NAME, JOB_NAME_LABEL: job_name.replace("/", "-")}


def replica_labels(job_name: str, rtype: str, index: int) -> dict[str, str]:
    return {**job_labels(job_name), REPLICA_TYPE_LABEL: rtype.lower(), REPLICA_INDEX_LABEL: str(index)}


def selector_string(job_name: str, rtype: str) -> str:
    """``metav1.FormatLabelSelector`` of the replica type's matchLabels: sorted ``k=v`` pairs."""
    labels = {**job_labels(job_name), REPLICA_TYPE_LABEL: rtype.lower()}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def replica_specs(job: Obj) -> dict[str, Obj]:
    """The replica specs in deterministic order (Master first); unknown types are kept after them."""
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    ordered = {t: specs[t] for t in REPLICA_TYPES if specs.get(t) is not None}
    ordered.update({t: s for t, s in specs.items() if t not in ordered and s is not None})
    return ordered


def replicas_of(spec: Obj) -> int:
    value = spec.get("replicas")
    return int(value) if value is not None else 1


def total_replicas(job: Obj) -> int:
    return sum(replicas_of(spec) for spec in replica_specs(job).values())


def run_policy(job: Obj) -> Obj:
    return (job.get("spec") or {}).get("runPolicy") or {}


def is_suspended(job: Obj) -> bool:
    return run_policy(job).get("suspend") is True


def nproc_per_node(job: Obj) -> str:
    """The spec's ``nprocPerNode`` (defaulted to "auto"); the elastic policy's legacy field otherwise."""
    spec = job.get("spec") or {}
    if spec.get("nprocPerNode") is not None:
        return str(spec["nprocPerNode"])
    legacy = (spec.get("elasticPolicy") or {}).get("nProcPerNode")
    return str(legacy) if legacy is not None else DEFAULT_NPROC_PER_NODE


def nproc_int(job: Obj) -> int:
    """``getNprocPerNodeInt``: the integer value, 1 for "auto", "cpu", "gpu" or anything unparsable."""
    try:
        return int(nproc_per_node(job))
    except ValueError:
        return 1


def default_container(template: Obj) -> Obj | None:
    containers = (template.get("spec") or {}).get("containers") or []
    return next((c for c in containers if c.get("name") == CONTAINER_NAME), None)


def master_port(job: Obj) -> int | None:
    """``getPortFromPyTorchJob``: the Master's ``pytorch`` container port named ``pytorchjob-port``."""
    master = replica_specs(job).get(MASTER) or {}
    container = default_container(master.get("template") or {}) or {}
    for port in container.get("ports") or []:
        if port.get("name") == PORT_NAME:
            return int(port["containerPort"])
    return None


def managed_here(job: Obj) -> bool:
    """1.9 skips jobs whose ``runPolicy.managedBy`` names another controller (MultiKueue)."""
    manager = run_policy(job).get("managedBy")
    return manager in (None, "", KUBEFLOW_MANAGER)
