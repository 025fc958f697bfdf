"""One epoch of training and one evaluation, identical for single-process and DDP runs.

Shuffling always goes through a :class:`DistributedSampler` (with one replica when single-process) seeded by
``seed`` and re-seeded per epoch via ``set_epoch``. That makes every epoch's order a function of
``(seed, epoch)`` only, so a run resumed at epoch 3 sees exactly the batches an uninterrupted run would have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from airflow_k8s_ml.workloads import distributed
from airflow_k8s_ml.workloads.dataset import Dataset
from airflow_k8s_ml.workloads.distributed import DistContext


@dataclass(frozen=True)
class TrainStats:
    """Mean training loss over all ranks' samples this epoch, and this rank's optimizer steps."""

    train_loss: float
    steps: int


@dataclass(frozen=True)
class EvalStats:
    """Validation loss (mean cross-entropy) and accuracy on the full held-out part."""

    loss: float
    accuracy: float


def to_tensors(data: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """Features as float32 ``(n, 64)`` and labels as int64 ``(n,)``."""
    return torch.tensor(data.features, dtype=torch.float32), torch.tensor(data.labels, dtype=torch.int64)


def make_loader(
    data: Dataset, batch_size: int, seed: int, ctx: DistContext
) -> tuple[DataLoader[Any], DistributedSampler[Any]]:
    """A loader over this rank's shard; call ``sampler.set_epoch(epoch)`` before each epoch."""
    x, y = to_tensors(data)
    dataset = TensorDataset(x, y)
    sampler: DistributedSampler[Any] = DistributedSampler(
        dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=True, seed=seed
    )
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler


def train_one_epoch(
    model: nn.Module, loader: DataLoader[Any], optimizer: torch.optim.Optimizer, ctx: DistContext
) -> TrainStats:
    """Run one pass over this rank's shard; the loss is averaged over every rank's samples."""
    model.train()
    loss_fn = nn.CrossEntropyLoss(reduction="mean")
    loss_sum, n_samples, steps = 0.0, 0, 0
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        loss_sum += float(loss.detach()) * len(y)
        n_samples += len(y)
        steps += 1
    total_loss, total_samples = distributed.all_reduce_sum([loss_sum, float(n_samples)], ctx)
    return TrainStats(train_loss=total_loss / max(total_samples, 1.0), steps=steps)


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> EvalStats:
    """Loss and accuracy on ``(x, y)``. Each rank evaluates the whole (small) validation set, so every rank
    agrees on the numbers without another collective."""
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        accuracy = (logits.argmax(dim=1) == y).float().mean()
    return EvalStats(loss=float(loss), accuracy=float(accuracy))
