"""The child Jobs of a JobSet, built as ``constructJob`` and ``labelAndAnnotateObject`` do (pure).

Each replicated job ``r`` with ``replicas: n`` gives Jobs ``<jobset>-<r>-0`` .. ``<jobset>-<r>-(n-1)``;
the Job and its pod template carry the same ``jobset.sigs.k8s.io/*`` keys as labels and annotations; with
DNS hostnames on, pods get the JobSet's subdomain, so the Indexed Job's pod hostname
``<job>-<index>`` resolves as ``<job>-<index>.<subdomain>`` through the headless Service.
"""

from __future__ import annotations

import copy

from ...meta import owner_reference
from .api import (
    GLOBAL_REPLICAS_KEY,
    GROUP_NAME_KEY,
    GROUP_REPLICAS_KEY,
    JOB_GLOBAL_INDEX_KEY,
    JOB_GROUP_INDEX_KEY,
    JOB_INDEX_KEY,
    JOB_KEY,
    JOBSET_NAME_KEY,
    JOBSET_UID_KEY,
    REPLICATED_JOB_NAME_KEY,
    REPLICATED_JOB_REPLICAS_KEY,
    RESTARTS_KEY,
    Obj,
    dns_hostnames_enabled,
    job_hash_key,
    job_name,
    replicas,
    replicated_jobs,
    subdomain,
    suspended,
)


def _group(rjob: Obj) -> str:
    return str(rjob.get("groupName") or "default")


def jobset_keys(js: Obj, rjob: Obj, index: int) -> dict[str, str]:
    """The keys ``labelAndAnnotateObject`` sets, as labels and (the same) annotations."""
    meta = js["metadata"]
    rjobs = replicated_jobs(js)
    name = job_name(meta["name"], rjob["name"], index)
    before = 0
    for other in rjobs:
        if other["name"] == rjob["name"]:
            break
        before += replicas(other)
    group = _group(rjob)
    in_group = [r for r in rjobs if _group(r) == group]
    group_before = 0
    for other in in_group:
        if other["name"] == rjob["name"]:
            break
        group_before += replicas(other)
    restarts = int(((js.get("status") or {}).get("restarts")) or 0)
    return {
        JOBSET_NAME_KEY: meta["name"],
        JOBSET_UID_KEY: meta.get("uid", ""),
        REPLICATED_JOB_NAME_KEY: rjob["name"],
        RESTARTS_KEY: str(restarts),
        REPLICATED_JOB_REPLICAS_KEY: str(replicas(rjob)),
        GLOBAL_REPLICAS_KEY: str(sum(replicas(r) for r in rjobs)),
        JOB_INDEX_KEY: str(index),
        JOB_KEY: job_hash_key(meta["namespace"], name),
        JOB_GLOBAL_INDEX_KEY: str(before + index),
        GROUP_NAME_KEY: group,
        GROUP_REPLICAS_KEY: str(sum(replicas(r) for r in in_group)),
        JOB_GROUP_INDEX_KEY: str(group_before + index),
    }


def _label(meta: Obj, keys: dict[str, str]) -> None:
    meta["labels"] = {**(meta.get("labels") or {}), **keys}
    meta["annotations"] = {**(meta.get("annotations") or {}), **keys}


def build_job(js: Obj, rjob: Obj, index: int) -> Obj:
    """``constructJob``: one child Job, owned by the JobSet (controller reference)."""
    template = copy.deepcopy(rjob.get("template") or {})
    tmeta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    keys = jobset_keys(js, rjob, index)
    meta: Obj = {
        "name": job_name(js["metadata"]["name"], rjob["name"], index),
        "namespace": js["metadata"]["namespace"],
        "labels": dict(tmeta.get("labels") or {}),
        "annotations": dict(tmeta.get("annotations") or {}),
        "ownerReferences": [owner_reference(js)],
    }
    _label(meta, keys)
    pod_template = spec.setdefault("template", {})
    _label(pod_template.setdefault("metadata", {}), keys)
    if dns_hostnames_enabled(js):
        pod_template.setdefault("spec", {})["subdomain"] = subdomain(js)
    spec["suspend"] = suspended(js)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def desired_jobs(js: Obj) -> list[Obj]:
    """Every child Job the JobSet's current run should have, in spec order."""
    return [build_job(js, rjob, i) for rjob in replicated_jobs(js) for i in range(replicas(rjob))]


def headless_service(js: Obj) -> Obj:
    """``createHeadlessSvcIfNecessary``: named after the subdomain, selecting the JobSet's pods."""
    network = (js.get("spec") or {}).get("network") or {}
    publish = network.get("publishNotReadyAddresses")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": subdomain(js),
            "namespace": js["metadata"]["namespace"],
            "ownerReferences": [owner_reference(js)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOBSET_NAME_KEY: js["metadata"]["name"]},
            "publishNotReadyAddresses": True if publish is None else bool(publish),
        },
    }


def resumed_pod_template(job_template: Obj, rjob: Obj) -> Obj:
    """``resumeJob``: what may change while suspended (for Kueue) reaches the Job as it resumes: the
    replicated job's pod labels, annotations and nodeSelector merged in, its tolerations and scheduling
    gates added when missing."""
    merged = copy.deepcopy(job_template)
    source = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
    meta, smeta = merged.setdefault("metadata", {}), source.get("metadata") or {}
    for key in ("labels", "annotations"):
        if smeta.get(key):
            meta[key] = {**(meta.get(key) or {}), **smeta[key]}
    spec, sspec = merged.setdefault("spec", {}), source.get("spec") or {}
    if sspec.get("nodeSelector"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **sspec["nodeSelector"]}
    for key in ("tolerations", "schedulingGates"):
        current = list(spec.get(key) or [])
        current += [item for item in sspec.get(key) or [] if item not in current]
        if current:
            spec[key] = current
    return merged
