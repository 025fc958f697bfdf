"""``TF_CONFIG``: the cluster spec and the task of one replica, as ``genTFConfigJSONStr`` writes it
(training-operator release-1.9, ``pkg/controller.v1/tensorflow/tensorflow.go``). Pure.

The JSON is Go's ``json.Marshal`` of ``TFConfig``: fields ``cluster``, ``task`` (``type``, ``index``) and
``environment: "cloud"`` in that order, the cluster's replica types (lowercased) sorted as Go sorts map
keys, no spaces. With ``enableDynamicWorker`` the sparse form: a PS knows only itself, a Worker all PS and
itself (``{"worker": {"<index>": ...}}``), no ``environment``. One difference on purpose: an endpoint is
``<pod IP>:<port>`` (the replica's IP, reserved before its pod exists), because nothing resolves Service
names on a laptop; upstream writes ``<job>-<type>-<index>.<namespace>.svc:<port>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..pytorchjob.api import Obj, replica_name, replicas_of
from .api import PS, TF_CONFIG, WORKER, dynamic_workers, is_distributed, port_of, replica_specs

Slot = tuple[str, int]


def service_host(job: Obj, rtype: str, index: int) -> str:
    """What upstream puts in the cluster spec: the replica's headless Service's DNS name."""
    meta = job["metadata"]
    return f"{replica_name(meta['name'], rtype, index)}.{meta['namespace']}.svc"


def address_slots(job: Obj) -> list[Slot]:
    """Every replica is named in every replica's ``TF_CONFIG``; none when the job is not distributed."""
    if not is_distributed(job):
        return []
    return [(rtype, i) for rtype, spec in replica_specs(job).items() for i in range(replicas_of(spec))]


def cluster_spec(job: Obj, addresses: Mapping[Slot, str | None]) -> dict[str, list[str]]:
    """``genClusterSpec``: replica type (lowercased) -> ``host:port`` of each replica, by index."""
    cluster: dict[str, list[str]] = {}
    for rtype, spec in replica_specs(job).items():
        port = port_of(job, rtype)
        hosts = [addresses.get((rtype, i)) or service_host(job, rtype, i) for i in range(replicas_of(spec))]
        cluster[rtype.lower()] = [f"{host}:{port}" for host in hosts]
    return dict(sorted(cluster.items()))


def tf_config(job: Obj, rtype: str, index: int, addresses: Mapping[Slot, str | None]) -> str:
    """``genTFConfigJSONStr`` for replica ``rtype``/``index``."""
    cluster = cluster_spec(job, addresses)
    task = {"type": rtype.lower(), "index": index}
    if not dynamic_workers(job):
        return json.dumps({"cluster": cluster, "task": task, "environment": "cloud"}, separators=(",", ":"))
    ps, worker = cluster.get(PS.lower(), []), cluster.get(WORKER.lower(), [])
    sparse: dict[str, object] = {"worker": {}, "ps": []}
    if rtype == PS:
        sparse["ps"] = [ps[index]]
    elif rtype == WORKER:
        sparse = {"worker": {str(index): worker[index]}, "ps": ps}
    return json.dumps({"cluster": sparse, "task": task}, separators=(",", ":"))


def tf_env(job: Obj, rtype: str, index: int, addresses: Mapping[Slot, str | None]) -> list[Obj]:
    """``SetClusterSpec``: ``TF_CONFIG`` for a distributed job, nothing for a single replica."""
    if not is_distributed(job):
        return []
    return [{"name": TF_CONFIG, "value": tf_config(job, rtype, index, addresses)}]


__all__ = ["address_slots", "cluster_spec", "service_host", "tf_config", "tf_env"]
