"""Distributed context from the environment a Kubeflow PyTorchJob or TrainJob injects, and the few
collectives we need.

A PyTorchJob sets ``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` in every replica. A Trainer v2
TrainJob (torch runtime) sets torchrun's ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``,
``PET_MASTER_ADDR`` and ``PET_MASTER_PORT`` instead; under ``torchrun`` those become ``WORLD_SIZE``/``RANK``,
and without it (our entrypoint runs one process per node) they are read directly. Reading them is pure
(:func:`context_from_env`) so it is unit-tested without starting anything. With no world size or 1 the same
training code runs single-process and every helper here is a no-op, which is why the training loop never
branches on "distributed or not" beyond asking :attr:`DistContext.is_main`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_k8s_ml.errors import K8sMLError, ValidationError

DEFAULT_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class DistContext:
    """This process's place in the job. ``world_size == 1`` means plain single-process training."""

    world_size: int = 1
    rank: int = 0
    master_addr: str = ""
    master_port: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints and prints the per-epoch summary."""
        return self.rank == 0


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name) or ""
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValidationError(name, f"must be an integer, got {raw!r}") from exc


def _torchrun_env(env: Mapping[str, str]) -> Mapping[str, str]:
    """A TrainJob node's ``PET_*`` variables as the PyTorchJob names, for one process per node.

    ``WORLD_SIZE`` set (torchrun, or a PyTorchJob) wins. More than one process per node needs torchrun to
    start them, which is said rather than silently training on one process of N."""
    if env.get("WORLD_SIZE") or not env.get("PET_NNODES"):
        return env
    nproc = env.get("PET_NPROC_PER_NODE") or "1"
    if nproc != "1":
        raise ValidationError(
            "PET_NPROC_PER_NODE",
            f"is {nproc!r}: more than one process per node needs torchrun as the command "
            "(or num_proc_per_node=1)",
        )
    return {
        **env,
        "WORLD_SIZE": env["PET_NNODES"],
        "RANK": env.get("PET_NODE_RANK") or "",
        "MASTER_ADDR": env.get("PET_MASTER_ADDR") or "",
        "MASTER_PORT": env.get("PET_MASTER_PORT") or "",
    }


def context_from_env(env: Mapping[str, str]) -> DistContext:
    """Read the PyTorchJob (or TrainJob ``PET_*``) variables; inconsistent values fail fast instead of hanging
    in rendezvous."""
    env = _torchrun_env(env)
    world_size = _int_env(env, "WORLD_SIZE", 1)
    if world_size < 1:
        raise ValidationError("WORLD_SIZE", f"must be >= 1, got {world_size}")
    if world_size == 1:
        return DistContext()
    rank = _int_env(env, "RANK", -1)
    if not 0 <= rank < world_size:
        raise ValidationError(
            "RANK", f"must be in 0..{world_size - 1} when WORLD_SIZE={world_size}, got {rank}"
        )
    master_addr = env.get("MASTER_ADDR") or ""
    if not master_addr:
        raise ValidationError("MASTER_ADDR", "required when WORLD_SIZE > 1")
    master_port = _int_env(env, "MASTER_PORT", 0)
    if not 0 < master_port < 65536:
        raise ValidationError("MASTER_PORT", f"required when WORLD_SIZE > 1, got {env.get('MASTER_PORT')!r}")
    return DistContext(world_size, rank, master_addr, master_port)


def init(ctx: DistContext, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> None:
    """Join the gloo process group (CPU-only, no NCCL) and use one torch thread per process.

    One thread each: replicas of a PyTorchJob share the node's cores, and N processes x N threads on 2 cores
    is much slower than N x 1. ``timeout_seconds`` bounds rendezvous and every collective, so a lost peer ends
    the job with an error instead of hanging until Airflow's deadline.
    """
    if not ctx.distributed:
        return
    import torch
    import torch.distributed as tdist

    torch.set_num_threads(1)
    address = f"tcp://{ctx.master_addr}:{ctx.master_port}"
    try:
        tdist.init_process_group(
            "gloo",
            init_method=address,
            rank=ctx.rank,
            world_size=ctx.world_size,
            timeout=dt.timedelta(seconds=timeout_seconds),
        )
    except (RuntimeError, ValueError) as exc:  # DistStoreError & co. are RuntimeErrors
        raise K8sMLError(
            f"DDP rendezvous failed for rank {ctx.rank} of {ctx.world_size} at {address} "
            f"(timeout {timeout_seconds:g}s): {exc}"
        ) from exc


def all_reduce_sum(values: list[float], ctx: DistContext) -> list[float]:
    """Element-wise sum over all ranks (used for loss totals and sample counts)."""
    if not ctx.distributed:
        return list(values)
    import torch
    import torch.distributed as tdist

    tensor = torch.tensor(values, dtype=torch.float64)
    tdist.all_reduce(tensor, op=tdist.ReduceOp.SUM)
    return [float(v) for v in tensor.tolist()]


def barrier(ctx: DistContext) -> None:
    """Wait for every rank (at the end, so no replica exits before rank 0 committed the last checkpoint)."""
    if ctx.distributed:
        import torch.distributed as tdist

        tdist.barrier()


def shutdown(ctx: DistContext) -> None:
    """Leave the process group cleanly."""
    if ctx.distributed:
        import torch.distributed as tdist

        if tdist.is_initialized():
            tdist.destroy_process_group()
