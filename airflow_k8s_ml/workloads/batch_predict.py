"""Batch inference: ``python -m airflow_k8s_ml.workloads.batch_predict --input-uri --output-uri --model-uri``.

The nightly CronJob's workload. It reads every batch file (``*.csv``, ``*.jsonl``/``*.ndjson``/``*.json``)
directly under the input prefix, writes ``predictions-<part>.jsonl`` per input file to the output prefix and
then ``_SUMMARY.json`` (count, class histogram, accuracy where labels were given, model URI and step,
duration). The summary is written last, so its presence means the whole batch is done. An input prefix with
no batch files is an error (exit 1): an empty nightly batch usually means the upstream export broke.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads import io
from airflow_k8s_ml.workloads.cli import env_or, exit_with, log, require
from airflow_k8s_ml.workloads.dataset import N_CLASSES
from airflow_k8s_ml.workloads.instances import (
    Record,
    is_batch_file,
    parse_batch_file,
    part_name,
    prediction_lines,
)

SUMMARY_FILE = "_SUMMARY.json"


@dataclass(frozen=True)
class BatchConfig:
    """Input and output prefixes and the checkpoint to predict with."""

    input_uri: str
    output_uri: str
    model_uri: str
    batch_size: int = 512


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The CLI; every option also reads its env var (named in the help)."""
    p = argparse.ArgumentParser(
        prog="python -m airflow_k8s_ml.workloads.batch_predict", description="Batch inference"
    )
    for flag, var, text in (
        ("--input-uri", "INPUT_URI", "prefix holding the batch files, s3:// or file://"),
        ("--output-uri", "OUTPUT_URI", "prefix to write predictions-<part>.jsonl and _SUMMARY.json to"),
        ("--model-uri", "MODEL_URI", "checkpoint folder URI of the model"),
    ):
        default = env_or(env, var, None)
        p.add_argument(flag, default=default, required=default is None, help=f"{text} (env {var})")
    p.add_argument(
        "--batch-size",
        type=int,
        default=env_or(env, "BATCH_SIZE", 512),
        help="rows per forward pass (env BATCH_SIZE)",
    )
    return p


def parse_config(argv: Sequence[str] | None, env: Mapping[str, str]) -> BatchConfig:
    """Merge CLI and env into a checked :class:`BatchConfig`."""
    a = build_parser(env).parse_args(argv)
    for name in ("input_uri", "output_uri", "model_uri"):
        io.parse_uri(getattr(a, name), name)
    require(
        a.model_uri, "model_uri", a.model_uri.startswith(("s3://", "file://")), "must be s3:// or file://"
    )
    require(a.batch_size, "batch_size", a.batch_size >= 1, "must be >= 1")
    return BatchConfig(a.input_uri, a.output_uri, a.model_uri, a.batch_size)


@dataclass
class Tally:
    """Running totals for the summary."""

    count: int = 0
    labeled: int = 0
    correct: int = 0
    histogram: list[int] = field(default_factory=lambda: [0] * N_CLASSES)

    def add(self, records: Sequence[Record], predictions: Sequence[int]) -> None:
        for record, pred in zip(records, predictions, strict=True):
            self.count += 1
            self.histogram[pred] += 1
            if record.label is not None:
                self.labeled += 1
                self.correct += int(record.label == pred)


def build_summary(
    cfg: BatchConfig, tally: Tally, model_step: int, files: list[dict[str, Any]], started_at: dt.datetime
) -> dict[str, Any]:
    """The ``_SUMMARY.json`` document; the duration is measured from ``started_at`` (wall clock, UTC)."""
    finished_at = dt.datetime.now(dt.UTC)
    return {
        "count": tally.count,
        "class_histogram": {str(k): n for k, n in enumerate(tally.histogram)},
        "labeled_count": tally.labeled,
        "accuracy": (tally.correct / tally.labeled) if tally.labeled else None,
        "model_uri": cfg.model_uri,
        "model_step": model_step,
        "input_uri": cfg.input_uri,
        "output_uri": cfg.output_uri,
        "files": files,
        "started_at": started_at.isoformat(),
        "finished_at": finished_at.isoformat(),
        "duration_seconds": round((finished_at - started_at).total_seconds(), 3),
    }


def list_inputs(input_uri: str) -> list[str]:
    """The batch files under ``input_uri``; none at all is an error (exit 2), checked before loading torch."""
    inputs = []
    for uri in io.list_files(input_uri, "input_uri"):
        if is_batch_file(io.parse_uri(uri).name):
            inputs.append(uri)
        else:
            log(f"skip {uri} (not .csv/.jsonl/.ndjson/.json)")
    if not inputs:
        raise ValidationError("input_uri", f"no batch files (.csv/.jsonl/.ndjson/.json) under {input_uri}")
    return inputs


def predict_file(uri: str, model: Any, cfg: BatchConfig) -> tuple[list[Record], list[int], str]:
    """Predict one batch file in chunks of ``batch_size``, write its predictions file; return both + URI."""
    from airflow_k8s_ml.workloads.model import predict

    name = io.parse_uri(uri).name
    records = parse_batch_file(name, io.read_bytes(uri))
    predictions: list[int] = []
    for i in range(0, len(records), cfg.batch_size):
        predictions += predict(model, [r.features for r in records[i : i + cfg.batch_size]])
    out_uri = io.join_uri(cfg.output_uri, f"predictions-{part_name(name)}.jsonl")
    io.write_bytes(out_uri, prediction_lines(name, records, predictions), "application/x-ndjson")
    return records, predictions, out_uri


def run(cfg: BatchConfig) -> dict[str, Any]:
    """Predict every batch file, then write the summary (last, as the completion marker) and return it."""
    from airflow_k8s_ml.workloads.checkpoint_io import load_checkpoint

    started_at = dt.datetime.now(dt.UTC)
    inputs = list_inputs(cfg.input_uri)
    log(f"batch_predict start input_uri={cfg.input_uri} files={len(inputs)} model_uri={cfg.model_uri}")
    loaded = load_checkpoint(cfg.model_uri)
    log(f"model loaded step={loaded.step}")
    tally, files = Tally(), []
    for uri in inputs:
        records, predictions, out_uri = predict_file(uri, loaded.model, cfg)
        tally.add(records, predictions)
        files.append({"input": uri, "output": out_uri, "count": len(records)})
        name = io.parse_uri(uri).name
        log(f"predicted file={name} rows={len(records)} total={tally.count} output={out_uri}")
    summary = build_summary(cfg, tally, loaded.step, files, started_at)
    summary_bytes = json.dumps(summary, indent=2).encode()
    io.write_bytes(io.join_uri(cfg.output_uri, SUMMARY_FILE), summary_bytes, "application/json")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Entrypoint: parse, predict, print the ``done`` line."""
    summary = run(parse_config(argv, os.environ))
    acc = f" accuracy={summary['accuracy']:.4f}" if summary["accuracy"] is not None else ""
    summary_uri = io.join_uri(summary["output_uri"], SUMMARY_FILE)
    log(
        f"done count={summary['count']} files={len(summary['files'])}{acc} summary={summary_uri} "
        f"seconds={summary['duration_seconds']:.2f}"
    )
    return 0


if __name__ == "__main__":
    exit_with(main)
