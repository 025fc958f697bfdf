"""Gang scheduling with Volcano, rendered on an already built workload (pure; no cluster support).

Why a transform of the rendered object rather than more pod arguments: a gang scheduler needs the same
three things on every pod template of a workload - ``schedulerName``, the PodGroup the pods belong to, and
how many must start together - and each kind says the last one in its own place. Upstream's conventions:

- pods name their PodGroup by the annotation ``scheduling.k8s.io/group-name`` (Volcano's
  ``KubeGroupNameAnnotationKey``) and are scheduled by ``schedulerName: volcano``;
- a **PyTorchJob** gang: the Kubeflow training operator (run with ``--gang-scheduler-name=volcano``) creates
  a PodGroup named after the job, with ``minMember`` = ``runPolicy.schedulingPolicy.minAvailable`` (default:
  every replica), and annotates the pods with its name; we render the same, explicitly, so the pods match
  the PodGroup even when the operator leaves a set ``schedulerName`` alone;
- a **Job** (one pod here): Volcano's PodGroup controller creates a PodGroup (``minMember`` 1) for each
  owner of pods scheduled by Volcano; only ``schedulerName`` is rendered.

:func:`volcano_podgroup` renders the ``scheduling.volcano.sh/v1beta1`` PodGroup such a controller creates,
for a user who creates it themselves (e.g. no training operator on the cluster).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_k8s_ml.manifests.validation import fail

__all__ = [
    "GANG_SCHEDULERS",
    "GROUP_NAME_ANNOTATION",
    "check_gang_scheduler",
    "volcano_podgroup",
    "with_gang_scheduler",
]

GANG_SCHEDULERS = ("volcano",)
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
#: The kinds a gang scheduler can be rendered on (a TrainJob's pods come from its runtime: set it there).
GANG_KINDS = frozenset({"Job", "PyTorchJob"})


def check_gang_scheduler(value: Any, scheduler_name: Any, kind: str) -> str | None:
    """``gang_scheduler`` as given, checked: one of :data:`GANG_SCHEDULERS`, on a kind that has pod templates
    of its own, and not contradicting an explicit ``scheduler_name``."""
    if value is None:
        return None
    if value not in GANG_SCHEDULERS:
        raise fail("gang_scheduler", f"must be one of {', '.join(GANG_SCHEDULERS)} or None, got {value!r}")
    if kind not in GANG_KINDS:
        raise fail(
            "gang_scheduler",
            f"is not supported on a {kind}: set schedulerName in its runtime's pod templates",
        )
    if scheduler_name is not None and scheduler_name != value:
        raise fail("gang_scheduler", f"{value!r} contradicts scheduler_name={scheduler_name!r}")
    return str(value)


def _templates(obj: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], int]]:
    """Each pod template of a Job or PyTorchJob, with how many pods it stands for."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "PyTorchJob":
        for replica in (spec.get("pytorchReplicaSpecs") or {}).values():
            yield replica["template"], int(replica.get("replicas", 1))
    else:
        yield spec["template"], int(spec.get("parallelism", 1))


def with_gang_scheduler(obj: Mapping[str, Any], scheduler: str) -> dict[str, Any]:
    """A copy of the rendered Job or PyTorchJob with its pods scheduled by ``scheduler`` as one gang (see
    the module doc for what each kind gets)."""
    out = copy.deepcopy(dict(obj))
    name = str((out.get("metadata") or {}).get("name") or "")
    total = 0
    for template, pods in _templates(out):
        total += pods
        pod_spec = template.setdefault("spec", {})
        pod_spec["schedulerName"] = scheduler
        if out.get("kind") == "PyTorchJob":
            template.setdefault("metadata", {}).setdefault("annotations", {})[GROUP_NAME_ANNOTATION] = name
    if out.get("kind") == "PyTorchJob":
        policy = out["spec"].setdefault("runPolicy", {}).setdefault("schedulingPolicy", {})
        policy.setdefault("minAvailable", total)
    return out


def volcano_podgroup(
    name: str, namespace: str, min_member: int, *, queue: str | None = None, priority_class: str | None = None
) -> dict[str, Any]:
    """The ``scheduling.volcano.sh/v1beta1`` PodGroup ``name``: ``min_member`` pods start together."""
    spec: dict[str, Any] = {"minMember": min_member}
    if queue is not None:
        spec["queue"] = queue
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
