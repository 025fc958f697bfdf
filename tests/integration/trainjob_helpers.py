"""Helpers for the TrainJob/JobSet tests: bodies, create/read through CustomObjectsApi, waits."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from ..cluster_fixtures import python_cmd, wait_for, watch_versions

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
JOBSET_GROUP, JOBSET_VERSION = "jobset.x-k8s.io", "v1alpha2"
Obj = dict[str, Any]

# torch.distributed without torchrun: the process group is built from the PET_* variables the torch plugin
# injects (what torchrun itself reads), with a gloo all-reduce across the nodes.
ALL_REDUCE = """
import datetime, os, socket
import torch, torch.distributed as dist
rank, world = int(os.environ["PET_NODE_RANK"]), int(os.environ["PET_NNODES"])
nproc = os.environ["PET_NPROC_PER_NODE"]
print(f"rank={rank} world={world} nproc={nproc} host={socket.gethostname()}", flush=True)
dist.init_process_group(
    "gloo",
    init_method=f"tcp://{os.environ['PET_MASTER_ADDR']}:{os.environ['PET_MASTER_PORT']}",
    rank=rank,
    world_size=world,
    timeout=datetime.timedelta(seconds=60),
)
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"all_reduce={value.item():g} world_size={dist.get_world_size()}", flush=True)
dist.destroy_process_group()
"""


def trainjob(name: str, code: str | None = None, *, runtime: Obj | None = None, **spec: Any) -> Obj:
    trainer: Obj = dict(spec.pop("trainer", {}))
    if code is not None:
        trainer.setdefault("image", "python:3.11")
        trainer["command"] = python_cmd(code)
    body: Obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": runtime or {"name": "torch-distributed"}, **spec},
    }
    if trainer:
        body["spec"]["trainer"] = trainer
    return body


def create_trainjob(custom: client.CustomObjectsApi, namespace: str, body: Obj) -> Obj:
    return custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs", body)  # type: ignore[no-any-return]


def get_trainjob(custom: client.CustomObjectsApi, namespace: str, name: str) -> Obj:
    return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs", name)  # type: ignore[no-any-return]


def get_jobset(custom: client.CustomObjectsApi, namespace: str, name: str) -> Obj:
    return custom.get_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", name)  # type: ignore[no-any-return]


def condition(obj: Obj, type_: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def is_true(type_: str) -> Any:
    def check(obj: Obj) -> bool:
        found = condition(obj, type_)
        return found is not None and found["status"] == "True"

    return check


def watch_trainjob(
    custom: client.CustomObjectsApi, namespace: str, name: str, until: Any, since: str, timeout: int = 90
) -> list[Obj]:
    return watch_versions(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "trainjobs",
        name=name,
        until=until,
        timeout=timeout,
        since=since,
        describe=lambda o: o.get("status"),
    )


def condition_history(versions: list[Obj]) -> list[str]:
    """The distinct sequences of (type=status) conditions seen, in order."""
    out: list[str] = []
    for version in versions:
        current = ",".join(
            f"{c['type']}={c['status']}" for c in (version.get("status") or {}).get("conditions") or []
        )
        if not out or out[-1] != current:
            out.append(current)
    return out


def wait_trainjob(
    custom: client.CustomObjectsApi, namespace: str, name: str, until: Any, timeout: float = 90
) -> Obj:
    return wait_for(lambda: get_trainjob(custom, namespace, name), until, timeout, what=f"trainjob {name}")
