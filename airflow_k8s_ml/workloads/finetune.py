"""Fine-tune the digits classifier: ``python -m airflow_k8s_ml.workloads.finetune --checkpoint-uri URI``.

The reference training workload of the demo DAG. It commits a checkpoint after *every* epoch (so a killed or
failed attempt loses at most one epoch), resumes model, optimizer and epoch from ``RESUME_FROM`` (what the
operator injects on retry), warm-starts from ``--base-model`` (the last deployed model), and runs as DDP over
gloo when a PyTorchJob starts it (``WORLD_SIZE`` > 1), rank 0 alone writing checkpoints.

Progress lines (stdout): ``epoch=2/5 step=46 loss=0.4123 val_accuracy=0.9120 val_loss=0.3012 seconds=0.21``,
then ``checkpoint step=2 uri=...``; the last line is ``done ...``. Exit codes: 0 ok, 1 error, 2 bad
arguments, 3 the ``--fail-at-epoch`` test hook.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from airflow_k8s_ml.errors import CheckpointError
from airflow_k8s_ml.workloads import distributed
from airflow_k8s_ml.workloads.cli import (
    EXIT_INJECTED_FAILURE,
    env_or,
    exit_with,
    log,
    log_error,
    require,
)
from airflow_k8s_ml.workloads.dataset import DEFAULT_DATA_PATH
from airflow_k8s_ml.workloads.distributed import DistContext
from airflow_k8s_ml.workloads.io import parse_uri


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything a run needs, after CLI and env are merged and checked."""

    checkpoint_uri: str
    data: Path = DEFAULT_DATA_PATH
    epochs: int = 5
    lr: float = 0.005
    batch_size: int = 64
    base_model: str | None = None
    resume_from: str | None = None
    seed: int = 0
    max_train_samples: int | None = None
    fail_at_epoch: int | None = None
    sleep_per_epoch: float = 0.0
    dist_timeout: float = distributed.DEFAULT_TIMEOUT_SECONDS


@dataclass
class FinetuneResult:
    """What a run did: the last epoch reached, its metrics and checkpoint (``None`` on non-zero ranks)."""

    last_epoch: int
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint_uri: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The CLI; each option's default comes from its env var (named in the help) when that is set."""
    p = argparse.ArgumentParser(
        prog="python -m airflow_k8s_ml.workloads.finetune", description=(__doc__ or "").split("\n")[0]
    )
    ckpt = env_or(env, "CHECKPOINT_URI", None)
    p.add_argument(
        "--checkpoint-uri",
        default=ckpt,
        required=ckpt is None,
        help="base URI for checkpoints, s3://bucket/prefix or file:///abs/path (env CHECKPOINT_URI)",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=env_or(env, "DATA_PATH", DEFAULT_DATA_PATH),
        help="digits CSV(.gz), 64 features + label per row (env DATA_PATH; default: bundled)",
    )
    p.add_argument("--epochs", type=int, default=env_or(env, "EPOCHS", 5), help="total epochs (env EPOCHS)")
    p.add_argument("--lr", type=float, default=env_or(env, "LR", 0.005), help="Adam learning rate (env LR)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=env_or(env, "BATCH_SIZE", 64),
        help="per-process batch size (env BATCH_SIZE)",
    )
    p.add_argument(
        "--base-model",
        default=env_or(env, "BASE_MODEL", None),
        help="checkpoint folder URI to warm-start the weights from (env BASE_MODEL)",
    )
    p.add_argument(
        "--resume-from",
        default=env_or(env, "RESUME_FROM", None),
        help="checkpoint folder URI to resume model, optimizer and epoch from (env RESUME_FROM)",
    )
    p.add_argument(
        "--seed", type=int, default=env_or(env, "SEED", 0), help="init and shuffle seed (env SEED)"
    )
    p.add_argument(
        "--max-train-samples",
        type=int,
        default=env_or(env, "MAX_TRAIN_SAMPLES", None),
        help="cap on training rows, for speed (env MAX_TRAIN_SAMPLES; default: all)",
    )
    p.add_argument(
        "--fail-at-epoch",
        type=int,
        default=env_or(env, "FAIL_AT_EPOCH", None),
        help="test hook: exit 3 after training this epoch, BEFORE its checkpoint (env FAIL_AT_EPOCH)",
    )
    p.add_argument(
        "--sleep-per-epoch",
        type=float,
        default=env_or(env, "SLEEP_PER_EPOCH", 0.0),
        help="test hook: seconds to sleep after each epoch's checkpoint (env SLEEP_PER_EPOCH)",
    )
    p.add_argument(
        "--dist-timeout",
        type=float,
        default=env_or(env, "DIST_TIMEOUT_SECONDS", distributed.DEFAULT_TIMEOUT_SECONDS),
        help="DDP rendezvous/collective timeout in seconds (env DIST_TIMEOUT_SECONDS)",
    )
    return p


def _checked_uri(value: str | None, field_name: str) -> str | None:
    if value is None:
        return None
    loc = parse_uri(value, field_name)
    require(
        value,
        field_name,
        value.startswith(("s3://", "file://")) and bool(loc.key.strip("/")),
        "must be s3://bucket/prefix or file:///abs/path",
    )
    return value


def parse_config(argv: Sequence[str] | None, env: Mapping[str, str]) -> FinetuneConfig:
    """Merge CLI and env into a checked :class:`FinetuneConfig` (ValidationError on nonsense values)."""
    a = build_parser(env).parse_args(argv)
    require(a.epochs, "epochs", a.epochs >= 1, "must be >= 1")
    require(a.lr, "lr", a.lr > 0, "must be > 0")
    require(a.batch_size, "batch_size", a.batch_size >= 1, "must be >= 1")
    require(
        a.max_train_samples,
        "max_train_samples",
        a.max_train_samples is None or a.max_train_samples >= 1,
        "must be >= 1",
    )
    require(a.fail_at_epoch, "fail_at_epoch", a.fail_at_epoch is None or a.fail_at_epoch >= 1, "must be >= 1")
    require(a.sleep_per_epoch, "sleep_per_epoch", a.sleep_per_epoch >= 0, "must be >= 0")
    require(a.dist_timeout, "dist_timeout", a.dist_timeout > 0, "must be > 0")
    return FinetuneConfig(
        checkpoint_uri=_checked_uri(a.checkpoint_uri, "checkpoint_uri") or "",
        data=a.data,
        epochs=a.epochs,
        lr=a.lr,
        batch_size=a.batch_size,
        base_model=_checked_uri(a.base_model, "base_model"),
        resume_from=_checked_uri(a.resume_from, "resume_from"),
        seed=a.seed,
        max_train_samples=a.max_train_samples,
        fail_at_epoch=a.fail_at_epoch,
        sleep_per_epoch=a.sleep_per_epoch,
        dist_timeout=a.dist_timeout,
    )


def progress_line(epoch: int, epochs: int, step: int, record: Mapping[str, float], ctx: DistContext) -> str:
    """The per-epoch line the operators' log relay parses (``key=value`` pairs, spec order first)."""
    line = (
        f"epoch={epoch}/{epochs} step={step} loss={record['train_loss']:.4f} "
        f"val_accuracy={record['val_accuracy']:.4f} val_loss={record['val_loss']:.4f} "
        f"seconds={record['epoch_seconds']:.2f}"
    )
    return f"{line} rank={ctx.rank}" if ctx.distributed else line


def epoch_metrics(record: Mapping[str, float]) -> dict[str, float]:
    """The checkpoint manifest's metrics for one epoch: what gates and dashboards read."""
    metrics = {k: float(record[k]) for k in ("val_accuracy", "val_loss", "train_loss")}
    metrics.update(epoch=record["epoch"], global_step=record["step"])
    return metrics


def run(cfg: FinetuneConfig, ctx: DistContext) -> FinetuneResult:
    """Train from the configured start point to ``cfg.epochs``; see :func:`_train` for the loop."""
    distributed.init(ctx, cfg.dist_timeout)
    try:
        return _train(cfg, ctx)
    finally:
        distributed.shutdown(ctx)


class _Say:
    """``resume_point``'s logger, as the workload's own stdout lines (what the task log relays)."""

    def info(self, message: str, *args: Any) -> None:
        log(message % args if args else message)


@dataclass
class StartPoint:
    """Where training begins: the model, the last completed epoch/step and, on resume, optimizer and curve."""

    model: Any
    epoch: int = 0
    global_step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    optimizer_state: dict[str, Any] | None = None
    source: str = "init=random"


def _start_point(cfg: FinetuneConfig) -> StartPoint:
    """Resume (weights + optimizer + epoch) beats warm start (weights only) beats a fresh random init.

    Resume is from the newest complete checkpoint under ``CHECKPOINT_URI``, never an older one than
    ``RESUME_FROM`` (:func:`~airflow_k8s_ml.checkpoints.resume_point`): a pod that replaces an evicted one
    continues where the evicted one last committed, not where the attempt began."""
    from airflow_k8s_ml.checkpoints import resume_point
    from airflow_k8s_ml.workloads.checkpoint_io import load_checkpoint
    from airflow_k8s_ml.workloads.model import DigitsMLP

    resume_from = resume_point(cfg.checkpoint_uri, cfg.resume_from, log=_Say())
    if resume_from != cfg.resume_from:
        cfg = replace(cfg, resume_from=resume_from)
    if cfg.resume_from:
        if cfg.base_model:
            log(f"note: resume_from={cfg.resume_from} takes precedence over base_model={cfg.base_model}")
        loaded = load_checkpoint(cfg.resume_from, with_trainer_state=True)
        state = loaded.trainer_state
        if state is None:  # load_checkpoint(with_trainer_state=True) raises instead; keeps mypy honest
            raise CheckpointError(f"{cfg.resume_from}: no trainer state")
        return StartPoint(
            model=loaded.model,
            epoch=state.epoch,
            global_step=state.global_step,
            history=[h for h in loaded.history if int(h.get("epoch", 0)) <= state.epoch],
            optimizer_state=state.optimizer,
            source=f"resume_from={cfg.resume_from} resumed_epoch={state.epoch}",
        )
    if cfg.base_model:
        loaded = load_checkpoint(cfg.base_model)
        return StartPoint(model=loaded.model, source=f"base_model={cfg.base_model} base_step={loaded.step}")
    return StartPoint(model=DigitsMLP())


def _train(cfg: FinetuneConfig, ctx: DistContext) -> FinetuneResult:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from airflow_k8s_ml.workloads.checkpoint_io import commit_checkpoint
    from airflow_k8s_ml.workloads.dataset import load_digits, train_val
    from airflow_k8s_ml.workloads.model import TrainerState
    from airflow_k8s_ml.workloads.training import evaluate, make_loader, to_tensors, train_one_epoch

    torch.manual_seed(cfg.seed)
    train_set, val_set = train_val(load_digits(cfg.data), cfg.max_train_samples)
    start = _start_point(cfg)
    model, global_step, history = start.model, start.global_step, start.history
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    if start.optimizer_state is not None:
        optimizer.load_state_dict(start.optimizer_state)
    log(
        f"finetune start world_size={ctx.world_size} rank={ctx.rank} train_samples={len(train_set)} "
        f"val_samples={len(val_set)} epochs={cfg.epochs} start_epoch={start.epoch + 1} {start.source}"
    )
    result = FinetuneResult(last_epoch=start.epoch, history=history)
    if start.epoch >= cfg.epochs:
        log(f"nothing to do: checkpoint already at epoch {start.epoch} of {cfg.epochs}")
        return result

    train_model = DistributedDataParallel(model) if ctx.distributed else model
    loader, sampler = make_loader(train_set, cfg.batch_size, cfg.seed, ctx)
    val_x, val_y = to_tensors(val_set)
    for epoch in range(start.epoch + 1, cfg.epochs + 1):
        started = time.monotonic()
        sampler.set_epoch(epoch)
        stats = train_one_epoch(train_model, loader, optimizer, ctx)
        global_step += stats.steps
        ev = evaluate(model, val_x, val_y)
        record = {
            "epoch": epoch,
            "step": global_step,
            "train_loss": stats.train_loss,
            "val_loss": ev.loss,
            "val_accuracy": ev.accuracy,
            "epoch_seconds": time.monotonic() - started,
        }
        log(progress_line(epoch, cfg.epochs, global_step, record, ctx))
        if cfg.fail_at_epoch == epoch:
            log_error(f"error: injected failure at epoch {epoch} (--fail-at-epoch), before its checkpoint")
            raise SystemExit(EXIT_INJECTED_FAILURE)
        history.append(record)
        result.last_epoch, result.metrics = epoch, epoch_metrics(record)
        if ctx.is_main:
            state = TrainerState(epoch, global_step, optimizer.state_dict())
            uri = commit_checkpoint(cfg.checkpoint_uri, epoch, model, state, history, result.metrics)
            result.checkpoint_uri = uri
            log(f"checkpoint step={epoch} uri={uri}")
        if cfg.sleep_per_epoch:
            time.sleep(cfg.sleep_per_epoch)
    distributed.barrier(ctx)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Entrypoint: parse, train, print the ``done`` line."""
    started = time.monotonic()
    cfg = parse_config(argv, os.environ)
    ctx = distributed.context_from_env(os.environ)
    result = run(cfg, ctx)
    m = result.metrics
    acc = f" val_accuracy={m['val_accuracy']:.4f}" if m else ""
    log(
        f"done epoch={result.last_epoch}/{cfg.epochs}{acc} checkpoint={result.checkpoint_uri or '-'} "
        f"seconds={time.monotonic() - started:.2f}"
    )
    return 0


if __name__ == "__main__":
    exit_with(main)
