"""Seed a demo: ``python -m airflow_k8s_ml.workloads.seed --base-model-uri URI --input-uri URI``.

Writes what the nightly DAG expects to find on day one: a deliberately weak base model (1 epoch on a small
subset, committed as checkpoint ``step-1`` under ``--base-model-uri``) for fine-tuning to warm-start from and
visibly improve on, and a few labelled batch files for batch inference (alternating CSV and JSON lines, so
both readers run) taken from the held-out validation part, never from training rows.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads import io
from airflow_k8s_ml.workloads.cli import env_or, exit_with, log, require
from airflow_k8s_ml.workloads.dataset import DEFAULT_DATA_PATH, Dataset, load_digits, train_val

BASE_STEP_FOLDER = "step-1"


@dataclass(frozen=True)
class SeedConfig:
    """What to seed; either URI may be omitted to seed only the other."""

    base_model_uri: str | None
    input_uri: str | None
    data: Path = DEFAULT_DATA_PATH
    batches: int = 3
    rows_per_batch: int = 50
    max_train_samples: int = 200
    seed: int = 0


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The CLI; every option also reads its env var (named in the help)."""
    p = argparse.ArgumentParser(
        prog="python -m airflow_k8s_ml.workloads.seed", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument(
        "--base-model-uri",
        default=env_or(env, "BASE_MODEL_URI", None),
        help="checkpoint base URI to commit the base model under, as step-1 (env BASE_MODEL_URI)",
    )
    p.add_argument(
        "--input-uri",
        default=env_or(env, "INPUT_URI", None),
        help="prefix to write batch files to (env INPUT_URI)",
    )
    p.add_argument(
        "--data", type=Path, default=env_or(env, "DATA_PATH", DEFAULT_DATA_PATH), help="(env DATA_PATH)"
    )
    p.add_argument("--batches", type=int, default=env_or(env, "BATCHES", 3), help="batch files (env BATCHES)")
    p.add_argument(
        "--rows-per-batch", type=int, default=env_or(env, "ROWS_PER_BATCH", 50), help="(env ROWS_PER_BATCH)"
    )
    p.add_argument(
        "--max-train-samples",
        type=int,
        default=env_or(env, "MAX_TRAIN_SAMPLES", 200),
        help="training rows for the base model (env MAX_TRAIN_SAMPLES)",
    )
    p.add_argument("--seed", type=int, default=env_or(env, "SEED", 0), help="(env SEED)")
    return p


def parse_config(argv: Sequence[str] | None, env: Mapping[str, str]) -> SeedConfig:
    """Merge CLI and env into a checked :class:`SeedConfig`."""
    a = build_parser(env).parse_args(argv)
    if not a.base_model_uri and not a.input_uri:
        raise ValidationError("base_model_uri", "give --base-model-uri and/or --input-uri")
    if a.base_model_uri:
        require(
            a.base_model_uri,
            "base_model_uri",
            a.base_model_uri.startswith(("s3://", "file://")),
            "s3:// or file://",
        )
    if a.input_uri:
        io.parse_uri(a.input_uri, "input_uri")
    require(a.batches, "batches", a.batches >= 1, "must be >= 1")
    require(a.rows_per_batch, "rows_per_batch", a.rows_per_batch >= 1, "must be >= 1")
    require(a.max_train_samples, "max_train_samples", a.max_train_samples >= 1, "must be >= 1")
    return SeedConfig(
        a.base_model_uri, a.input_uri, a.data, a.batches, a.rows_per_batch, a.max_train_samples, a.seed
    )


def _number(value: float) -> int | float:
    """Pixel counts are integral; write ``7`` rather than ``7.0``."""
    return int(value) if value == int(value) else value


def batch_files(held_out: Dataset, batches: int, rows_per_batch: int) -> dict[str, bytes]:
    """File name -> content: consecutive held-out rows, even batches as CSV (65 columns: features + label),
    odd ones as JSON lines ``{"id", "features", "label"}``. Pure, so the formats are unit-tested."""
    if batches * rows_per_batch > len(held_out):
        raise ValidationError(
            "rows_per_batch", f"{batches} x {rows_per_batch} rows exceed the {len(held_out)} held-out rows"
        )
    files: dict[str, bytes] = {}
    for b in range(batches):
        rows = range(b * rows_per_batch, (b + 1) * rows_per_batch)
        if b % 2 == 0:
            lines = [
                ",".join(str(_number(v)) for v in (*held_out.features[i], held_out.labels[i])) for i in rows
            ]
            files[f"batch-{b:03d}.csv"] = ("\n".join(lines) + "\n").encode()
        else:
            lines = [
                json.dumps(
                    {
                        "id": f"batch-{b:03d}-{i - rows.start:04d}",
                        "features": [_number(v) for v in held_out.features[i]],
                        "label": held_out.labels[i],
                    },
                    separators=(",", ":"),
                )
                for i in rows
            ]
            files[f"batch-{b:03d}.jsonl"] = ("\n".join(lines) + "\n").encode()
    return files


def seed_inputs(cfg: SeedConfig, input_uri: str) -> list[str]:
    """Write the batch files under ``input_uri``; returns their URIs."""
    _, held_out = train_val(load_digits(cfg.data))
    uris = []
    for name, data in batch_files(held_out, cfg.batches, cfg.rows_per_batch).items():
        uri = io.join_uri(input_uri, name)
        io.write_bytes(uri, data)
        uris.append(uri)
        log(f"wrote input {uri} rows={cfg.rows_per_batch}")
    return uris


def seed_base_model(cfg: SeedConfig, base_model_uri: str) -> str:
    """Train the weak base model with the real fine-tune code path and commit it as ``step-1``.

    Idempotent: an already committed ``step-1`` is kept (a rerun of the demo against persistent S3 must not
    fail on "already committed", and must not replace the model earlier runs were compared against).
    """
    from airflow_k8s_ml.checkpoints import CheckpointWriter
    from airflow_k8s_ml.workloads import finetune
    from airflow_k8s_ml.workloads.distributed import DistContext

    if CheckpointWriter(base_model_uri).backend.has_manifest(BASE_STEP_FOLDER):
        uri = io.join_uri(base_model_uri, BASE_STEP_FOLDER) + "/"
        log(f"base model already committed at {uri}; keeping it")
        return uri
    result = finetune.run(
        finetune.FinetuneConfig(
            checkpoint_uri=base_model_uri,
            data=cfg.data,
            epochs=1,
            seed=cfg.seed,
            max_train_samples=cfg.max_train_samples,
        ),
        DistContext(),
    )
    if result.checkpoint_uri is None:
        raise ValidationError("base_model_uri", "base model was not committed")
    return result.checkpoint_uri


def main(argv: Sequence[str] | None = None) -> int:
    """Entrypoint: seed the base model and/or the inputs, print the ``done`` line."""
    cfg = parse_config(argv, os.environ)
    model_uri = seed_base_model(cfg, cfg.base_model_uri) if cfg.base_model_uri else None
    inputs = seed_inputs(cfg, cfg.input_uri) if cfg.input_uri else []
    log(f"done base_model_uri={model_uri or '-'} input_uri={cfg.input_uri or '-'} input_files={len(inputs)}")
    return 0


if __name__ == "__main__":
    exit_with(main)
