"""The PodDisruptionBudget of a distributed training run (``disruption_budget=True``): every replica kept.

Why: a voluntary drain (``kubectl drain``, a node upgrade, the cluster autoscaler's scale-down) evicts
through the Eviction API, which honours PodDisruptionBudgets. A distributed run - a PyTorchJob, TFJob or
TrainJob - loses its whole world when one rank goes (the others block in their collective, the controller
restarts or fails the run), so the budget says none may go: ``minAvailable`` is the run's replica count and
the selector is the label the run's controller puts on every pod of the run. The drain then waits (the API
answers 429) until the run ends; involuntary disruptions (node failure, preemption, kubelet pressure) are not
stopped by any budget. An integer, not ``100%``: a percentage needs the pods' controller to implement the
scale subresource, which these do not (upstream's disruption controller then reports an error).

The budget is owned by the workload (an ownerReference), so the garbage collector removes it with the
workload. Pure: an object in, an object out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.errors import ValidationError

__all__ = ["BUDGET_KINDS", "disruption_budget"]

#: kind -> (the replica specs' field, or None for a TrainJob; the pod labels selecting the run's ranks).
_TRAINING_OPERATOR_LABEL = "training.kubeflow.org/job-name"
_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
BUDGET_KINDS = ("PyTorchJob", "TFJob", "TrainJob")


def _replicas(workload: Mapping[str, Any]) -> int:
    """Every rank of the run: the sum of the replica specs (training operator), or a TrainJob's
    ``numNodes`` (its trainer nodes; the initializers run before them and finish)."""
    spec = workload.get("spec") or {}
    kind = workload.get("kind")
    if kind == "TrainJob":
        nodes = (spec.get("trainer") or {}).get("numNodes")
        if not isinstance(nodes, int) or nodes < 1:
            raise ValidationError(
                "disruption_budget",
                "needs num_nodes on a TrainJob (the budget keeps every node; the runtime's count is not "
                "known before the TrainJob is created)",
            )
        return nodes
    field = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"
    return sum(int((replica or {}).get("replicas", 1)) for replica in (spec.get(field) or {}).values())


def _selector(workload: Mapping[str, Any]) -> dict[str, str]:
    name = str(workload["metadata"]["name"])
    if workload.get("kind") == "TrainJob":
        return {_JOBSET_NAME: name, _REPLICATED_JOB: "node"}
    return {_TRAINING_OPERATOR_LABEL: name}


def disruption_budget(workload: Mapping[str, Any], owner_uid: str | None = None) -> dict[str, Any]:
    """policy/v1 PodDisruptionBudget keeping every rank of ``workload`` (rendered, or as created: then
    ``owner_uid`` makes the workload its owner). Another kind is an error naming ``disruption_budget``."""
    kind = workload.get("kind")
    if kind not in BUDGET_KINDS:
        raise ValidationError("disruption_budget", f"is for {', '.join(BUDGET_KINDS)}, not a {kind}")
    meta = workload.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    budget_meta: dict[str, Any] = {"name": meta["name"], "namespace": meta.get("namespace"), "labels": labels}
    if owner_uid:
        budget_meta["ownerReferences"] = [
            {
                "apiVersion": workload.get("apiVersion"),
                "kind": kind,
                "name": meta["name"],
                "uid": owner_uid,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": budget_meta,
        "spec": {"minAvailable": _replicas(workload), "selector": {"matchLabels": _selector(workload)}},
    }
