"""Names and small spec readers of kubeflow.org/v1 TFJob, as training-operator release-1.9 spells them
(``pkg/apis/kubeflow.org/v1/tensorflow_types.go``, ``pkg/controller.v1/tensorflow/util.go``).

The common job logic (pods, Services, conditions, limits, clean-up) is the PyTorchJob package's, given
:data:`TENSORFLOW`; what is TFJob's own is here, in :mod:`.pods` (``TF_CONFIG``), :mod:`.status`
(``UpdateJobStatus`` with the success policy) and :mod:`.admission`.
"""

from __future__ import annotations

from ..pytorchjob.api import Framework, Obj, replicas_of

KIND = "TFJob"
PLURAL = "tfjobs"
CONTROLLER_NAME = "tfjob-controller"
# ValidatingWebhookConfiguration entry name: it prefixes every admission denial message.
WEBHOOK_NAME = "validator.tfjob.training-operator.kubeflow.org"

CHIEF, EVALUATOR, MASTER, PS, WORKER = "Chief", "Evaluator", "Master", "PS", "Worker"
#: ``UpdateJobStatus`` iterates the replica types in this order (``allTypes``); so do we everywhere.
REPLICA_TYPES = (CHIEF, EVALUATOR, MASTER, PS, WORKER)

CONTAINER_NAME = "tensorflow"
PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222
DEFAULT_RESTART_POLICY = "Never"
SUCCESS_POLICY_DEFAULT = ""
SUCCESS_POLICY_ALL_WORKERS = "AllWorkers"
TF_CONFIG = "TF_CONFIG"

TENSORFLOW = Framework(
    KIND, PLURAL, CONTROLLER_NAME, "tfReplicaSpecs", REPLICA_TYPES, CONTAINER_NAME, PORT_NAME, DEFAULT_PORT
)


def replica_specs(job: Obj) -> dict[str, Obj]:
    return TENSORFLOW.replica_specs(job)


def port_of(job: Obj, rtype: str) -> int:
    """``GetPortFromTFJob``: the ``tensorflow`` container's port named ``tfjob-port``, else 2222."""
    template = replica_specs(job)[rtype].get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        if container.get("name") != CONTAINER_NAME:
            continue
        for port in container.get("ports") or []:
            if port.get("name") == PORT_NAME:
                return int(port["containerPort"])
    return DEFAULT_PORT


def contains_chief_or_master(job: Obj) -> bool:
    specs = replica_specs(job)
    return CHIEF in specs or MASTER in specs


def is_distributed(job: Obj) -> bool:
    """``isDistributed``: more than one replica in all; a single replica gets no ``TF_CONFIG``."""
    return sum(replicas_of(spec) for spec in replica_specs(job).values()) != 1


def is_master_role(job: Obj, rtype: str, index: int) -> bool:
    """``IsMasterRole``: the Chief (or Master); without one, Worker 0."""
    if contains_chief_or_master(job):
        return rtype in (CHIEF, MASTER)
    return rtype == WORKER and index == 0


def success_policy(job: Obj) -> str:
    return str((job.get("spec") or {}).get("successPolicy") or SUCCESS_POLICY_DEFAULT)


def dynamic_workers(job: Obj) -> bool:
    return (job.get("spec") or {}).get("enableDynamicWorker") is True


__all__ = [
    "CHIEF",
    "CONTAINER_NAME",
    "DEFAULT_PORT",
    "EVALUATOR",
    "KIND",
    "MASTER",
    "PS",
    "REPLICA_TYPES",
    "TENSORFLOW",
    "WORKER",
    "contains_chief_or_master",
    "is_distributed",
    "is_master_role",
    "port_of",
    "replica_specs",
    "success_policy",
]
