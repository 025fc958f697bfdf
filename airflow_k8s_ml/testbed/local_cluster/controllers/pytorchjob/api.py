"""Names, labels and small spec readers of kubeflow.org/v1 PyTorchJob, as the training operator spells them.

One module so the admission, the pod/service builders, the status rules and the controller cannot disagree
on a label key or a default (kubeflow/training-operator release-1.9: pkg/apis/kubeflow.org/v1,
pkg/controller.v1/common, pkg/controller.v1/pytorch).

:class:`Framework` is what differs between the training operator's v1 kinds for its common job logic
(``pkg/controller.v1/common``: the replica pods and Services, conditions, limits, clean-up), which this
package implements once and the TFJob controller (``controllers/tfjob``) reuses with its own
``Framework``: the kind, the replica specs' key, the replica types in order, the default container and
port, the controller's name.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Framework:
    """One kubeflow.org/v1 kind as the common job controller sees it."""

    kind: str
    plural: str
    controller_name: str
    specs_key: str
    replica_types: tuple[str, ...]  # deterministic order (Go iterates the map at random)
    container: str
    port_name: str
    default_port: int

    def reason(self, suffix: str) -> str:
        """``commonutil.NewReason``: the kind glued to the reason, e.g. ``PyTorchJobRunning``."""
        return f"{self.kind}{suffix}"

    def replica_specs(self, job: Obj) -> dict[str, Obj]:
        """The replica specs in :attr:`replica_types` order; unknown types are kept after them."""
        specs = (job.get("spec") or {}).get(self.specs_key) or {}
        ordered = {t: specs[t] for t in self.replica_types if specs.get(t) is not None}
        ordered.update({t: s for t, s in specs.items() if t not in ordered and s is not None})
        return ordered

    def default_container(self, template: Obj) -> Obj | None:
        containers = (template.get("spec") or {}).get("containers") or []
        return next((c for c in containers if c.get("name") == self.container), None)

    def job_labels(self, job_name: str) -> dict[str, str]:
        """``GenLabels``: what every pod and service of the job carries."""
        return {OPERATOR_NAME_LABEL: self.controller_name, JOB_NAME_LABEL: job_name.replace("/", "-")}

    def replica_labels(self, job_name: str, rtype: str, index: int) -> dict[str, str]:
        return {
            **self.job_labels(job_name),
            REPLICA_TYPE_LABEL: rtype.lower(),
            REPLICA_INDEX_LABEL: str(index),
        }

    def selector_string(self, job_name: str, rtype: str) -> str:
        """``metav1.FormatLabelSelector`` of the replica type's matchLabels: sorted ``k=v`` pairs."""
        labels = {**self.job_labels(job_name), REPLICA_TYPE_LABEL: rtype.lower()}
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

    def total_replicas(self, job: Obj) -> int:
        return sum(replicas_of(spec) for spec in self.replica_specs(job).values())


PYTORCH = Framework(
    KIND,
    "pytorchjobs",
    CONTROLLER_NAME,
    "pytorchReplicaSpecs",
    REPLICA_TYPES,
    CONTAINER_NAME,
    PORT_NAME,
    DEFAULT_PORT,
)


def replica_name(job_name: str, rtype: str, index: int) -> str:
    """``<job>-<type lowercased>-<index>``: pod and headless Service share it (``replicaName``)."""
    return f"{job_name}-{rtype.lower()}-{index}".replace("/", "-")


def job_labels(job_name: str) -> dict[str, str]:
    return PYTORCH.job_labels(job_name)


def replica_labels(job_name: str, rtype: str, index: int) -> dict[str, str]:
    return PYTORCH.replica_labels(job_name, rtype, index)


def selector_string(job_name: str, rtype: str) -> str:
    return PYTORCH.selector_string(job_name, rtype)


def replica_specs(job: Obj) -> dict[str, Obj]:
    """The replica specs in deterministic order (Master first); unknown types are kept after them."""
    return PYTORCH.replica_specs(job)


def replicas_of(spec: Obj) -> int:
    value = spec.get("replicas")
    return int(value) if value is not None else 1


def total_replicas(job: Obj) -> int:
    return PYTORCH.total_replicas(job)


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
    return PYTORCH.default_container(template)


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
