"""Pods and headless Services of a PyTorchJob replica, built from the replica template (pure functions).

Follows ``createNewPod``/``setPodEnv``/``CreateNewService`` of the training operator: the pod is named
``<job>-<type>-<index>``, carries the job/replica labels (plus ``job-role=master`` on the Master), a
controller ownerReference, the template's restart policy replaced by the replica's (ExitCode becomes
Never: the operator, not the kubelet, decides about retries) and the torch.distributed environment on
every container. One difference on purpose: ``MASTER_ADDR`` is the Master pod's own IP (given by the
caller), because nothing resolves Service names on a laptop; upstream puts the Service name there.
"""

from __future__ import annotations

import copy

from ...meta import owner_reference
from .api import (
    JOB_ROLE_LABEL,
    MASTER,
    PYTORCH,
    WORKER,
    Framework,
    Obj,
    master_port,
    nproc_int,
    nproc_per_node,
    replica_name,
    replica_specs,
    total_replicas,
)

RESTART_POLICY_EXIT_CODE = "ExitCode"


def _var(name: str, value: object) -> Obj:
    return {"name": name, "value": str(value)}


def master_env(job: Obj, master_addr: str) -> list[Obj]:
    """``MasterEnvVarGenerator``: port first, then address, each also as the torchrun ``PET_`` variable."""
    port = master_port(job)
    if port is None:
        raise ValueError("port not found")
    return [
        _var("MASTER_PORT", port),
        _var("PET_MASTER_PORT", port),
        _var("MASTER_ADDR", master_addr),
        _var("PET_MASTER_ADDR", master_addr),
    ]


def pod_env(job: Obj, rtype: str, index: int, master_addr: str) -> list[Obj]:
    """``setPodEnv``: what is appended to every container's env of replica ``rtype``/``index``.

    ``PYTHONUNBUFFERED`` is "0" as upstream sets it (Python only checks that it is non-empty).
    """
    env = [_var("PYTHONUNBUFFERED", "0")]
    replicas = total_replicas(job)
    if MASTER in replica_specs(job):
        rank = index + 1 if rtype == WORKER else index
        env += master_env(job, master_addr)
        env += [
            _var("WORLD_SIZE", replicas * nproc_int(job)),
            _var("RANK", rank),
            _var("PET_NPROC_PER_NODE", nproc_per_node(job)),
            _var("PET_NODE_RANK", rank),
        ]
    if (job.get("spec") or {}).get("elasticPolicy") is None:
        env.append(_var("PET_NNODES", replicas))
    return env


def pod_restart_policy(replica_policy: str) -> str:
    """``SetRestartPolicy``: ExitCode is not a pod policy; the pod gets Never and the operator retries."""
    return "Never" if replica_policy == RESTART_POLICY_EXIT_CODE else replica_policy


def build_pod(job: Obj, rtype: str, index: int, master_addr: str) -> Obj:
    """The pod for one PyTorchJob replica (``GetPodFromTemplate`` after ``createNewPod`` filled the
    template); the Master has the master role."""
    env = pod_env(job, rtype, index, master_addr)
    return build_replica_pod(PYTORCH, job, rtype, index, env, master_role=rtype == MASTER)


def build_replica_pod(
    fw: Framework,
    job: Obj,
    rtype: str,
    index: int,
    env: list[Obj],
    master_role: bool,
    env_container: str | None = None,
) -> Obj:
    """``createNewPod`` of the common job controller for any v1 kind: the replica's template with the
    job/replica labels (``job-role=master`` for the master role), ``env`` appended to every container (or
    only to ``env_container``: what the kind's ``SetClusterSpec`` adds), the replica's restart policy and a
    controller ownerReference."""
    replica = fw.replica_specs(job)[rtype]
    template = copy.deepcopy(replica.get("template") or {})
    template_meta = template.get("metadata") or {}
    labels = {
        **(template_meta.get("labels") or {}),
        **fw.replica_labels(job["metadata"]["name"], rtype, index),
    }
    if master_role:
        labels[JOB_ROLE_LABEL] = "master"
    spec = template.get("spec") or {}
    for container in spec.get("containers") or []:
        if env_container is None or container.get("name") == env_container:
            container["env"] = [*(container.get("env") or []), *copy.deepcopy(env)]
    spec["restartPolicy"] = pod_restart_policy(replica.get("restartPolicy") or "")
    meta: Obj = {
        "name": replica_name(job["metadata"]["name"], rtype, index),
        "namespace": job["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [owner_reference(job)],
    }
    for key in ("annotations", "finalizers"):
        if template_meta.get(key):
            meta[key] = copy.deepcopy(template_meta[key])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def template_sets_restart_policy(job: Obj, rtype: str, fw: Framework = PYTORCH) -> bool:
    """Upstream warns (SetPodTemplateRestartPolicy) when the template names a restart policy itself."""
    template = fw.replica_specs(job)[rtype].get("template") or {}
    return bool((template.get("spec") or {}).get("restartPolicy"))


def build_service(job: Obj, rtype: str, index: int, fw: Framework = PYTORCH) -> Obj:
    """``CreateNewService``: headless, selecting exactly this replica's pod, exposing the container ports."""
    replica = fw.replica_specs(job)[rtype]
    container = fw.default_container(replica.get("template") or {}) or {}
    labels = fw.replica_labels(job["metadata"]["name"], rtype, index)
    ports = [{"name": p.get("name", ""), "port": p["containerPort"]} for p in container.get("ports") or []]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": replica_name(job["metadata"]["name"], rtype, index),
            "namespace": job["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {"clusterIP": "None", "selector": dict(labels), "ports": ports},
    }


def env_value(pod: Obj, name: str, fw: Framework = PYTORCH) -> str | None:
    """The last value of ``name`` in the pod's default container (later entries win, as in kubelet)."""
    container = fw.default_container({"spec": pod.get("spec") or {}}) or {}
    values = [e.get("value") for e in container.get("env") or [] if e.get("name") == name]
    return values[-1] if values else None


__all__ = ["build_pod", "build_replica_pod", "build_service", "env_value", "pod_env", "pod_restart_policy"]
