"""The job kinds Kueue manages here (upstream's jobframework integrations batch/job, kubeflow.org/pytorchjob
and trainer.kubeflow.org/trainjob): how each is suspended, what pod sets its Workload asks for, whether it
finished, and whether its pods are ready. Pure functions over the job objects."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ...meta import controller_ref
from ...resources import ResourceType
from ..owned import served
from .api import QUEUE_NAME_LABEL

Obj = dict[str, Any]

# Jobs whose controller is one of these are part of a workload Kueue already manages (upstream's
# IsOwnerManagedByKueue): they get no Workload of their own and are never suspended by the webhook.
PARENT_KINDS = ("JobSet", "PyTorchJob", "TrainJob")


@dataclass(frozen=True)
class Integration:
    rt: ResourceType
    kind: str

    @property
    def api_version(self) -> str:
        return self.rt.api_version

    @property
    def prefix(self) -> str:
        return self.kind.lower()


JOB = Integration(served("batch", "v1", "jobs"), "Job")
PYTORCHJOB = Integration(served("kubeflow.org", "v1", "pytorchjobs"), "PyTorchJob")
TRAINJOB = Integration(served("trainer.kubeflow.org", "v1alpha1", "trainjobs"), "TrainJob")
INTEGRATIONS = (JOB, PYTORCHJOB, TRAINJOB)
JOBSETS = served("jobset.x-k8s.io", "v1alpha2", "jobsets")


def by_storage_key(key: tuple[str, str]) -> Integration | None:
    return next((i for i in INTEGRATIONS if i.rt.storage_key == key), None)


def queue_name(job: Obj) -> str | None:
    return (job.get("metadata", {}).get("labels") or {}).get(QUEUE_NAME_LABEL) or None


def managed(integration: Integration, job: Obj) -> bool:
    """Queued (the queue-name label) and not the child of a workload Kueue manages."""
    if queue_name(job) is None:
        return False
    owner = controller_ref(job)
    return not (integration is JOB and owner is not None and owner.get("kind") in PARENT_KINDS)


def is_suspended(integration: Integration, job: Obj) -> bool:
    spec = job.get("spec") or {}
    if integration is PYTORCHJOB:
        return (spec.get("runPolicy") or {}).get("suspend") is True
    return spec.get("suspend") is True


def set_suspended(integration: Integration, job: Obj, value: bool) -> None:
    spec = job.setdefault("spec", {})
    if integration is PYTORCHJOB:
        spec.setdefault("runPolicy", {})["suspend"] = value
    else:
        spec["suspend"] = value


def _templates(integration: Integration, job: Obj, jobset: Obj | None) -> list[tuple[str, int, Obj]]:
    spec = job.get("spec") or {}
    if integration is JOB:
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        count = min(parallelism, int(completions)) if completions is not None else parallelism
        return [("main", count, spec.get("template") or {})]
    if integration is PYTORCHJOB:
        specs = spec.get("pytorchReplicaSpecs") or {}
        ordered = sorted(specs.items(), key=lambda kv: (kv[0] != "Master", kv[0]))
        return [(t.lower(), int(s.get("replicas", 1)), s.get("template") or {}) for t, s in ordered if s]
    # TrainJob: its JobSet's replicated jobs (the runtime rendered with the TrainJob's overrides).
    result = []
    for rjob in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
        jspec = (rjob.get("template") or {}).get("spec") or {}
        count = int(rjob.get("replicas", 1)) * int(jspec.get("parallelism", 1))
        result.append((str(rjob.get("name")), count, jspec.get("template") or {}))
    return result


def pod_sets(integration: Integration, job: Obj, jobset: Obj | None = None) -> list[Obj]:
    """The Workload's ``spec.podSets``: one per pod template, with its pod count."""
    return [
        {"name": name, "count": count, "template": _pod_set_template(template)}
        for name, count, template in _templates(integration, job, jobset)
    ]


def _pod_set_template(template: Obj) -> Obj:
    kept = {"spec": copy.deepcopy(template.get("spec") or {})}
    meta = template.get("metadata") or {}
    if meta.get("labels") or meta.get("annotations"):
        kept["metadata"] = {k: copy.deepcopy(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    return kept


def finished(integration: Integration, job: Obj) -> tuple[bool, str, str]:
    """(finished, reason, message) as upstream's ``Finished()`` of each integration reports it."""
    conditions = (job.get("status") or {}).get("conditions") or []
    success = "Succeeded" if integration is PYTORCHJOB else "Complete"
    for cond in conditions:
        if cond.get("status") != "True":
            continue
        if cond.get("type") == success:
            message = "Job finished successfully" if integration is JOB else str(cond.get("message", ""))
            return True, "Succeeded", message
        if cond.get("type") == "Failed":
            return True, "Failed", str(cond.get("message", ""))
    return False, "", ""


def pods_ready(integration: Integration, job: Obj, expected: int) -> bool:
    status = job.get("status") or {}
    if integration is JOB:
        return int(status.get("ready", 0)) + int(status.get("succeeded", 0)) >= expected
    if integration is PYTORCHJOB:
        return any(
            c.get("type") == "Running" and c.get("status") == "True" for c in status.get("conditions") or []
        )
    counts = status.get("jobsStatus") or []
    return sum(int(c.get("ready", 0)) + int(c.get("succeeded", 0)) for c in counts) >= 1 and all(
        int(c.get("ready", 0)) + int(c.get("succeeded", 0)) > 0 for c in counts
    )


def apply_node_selector(integration: Integration, job: Obj, selectors: dict[str, dict[str, str]]) -> None:
    """Merge each admitted pod set's flavor node labels into its template's nodeSelector (Job, PyTorchJob;
    a TrainJob's would go through runtimePatches, not emulated)."""
    spec = job.get("spec") or {}
    if integration is JOB and selectors.get("main"):
        pod = spec.setdefault("template", {}).setdefault("spec", {})
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **selectors["main"]}
    if integration is PYTORCHJOB:
        for rtype, rspec in (spec.get("pytorchReplicaSpecs") or {}).items():
            if rspec and selectors.get(rtype.lower()):
                pod = rspec.setdefault("template", {}).setdefault("spec", {})
                pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **selectors[rtype.lower()]}
