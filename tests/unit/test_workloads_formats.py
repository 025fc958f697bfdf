"""The machine-read outputs: progress lines, checkpoint metrics, history and batch summaries (pure)."""

from __future__ import annotations

import datetime as dt
import re

from airflow_k8s_ml.workloads.batch_predict import BatchConfig, Tally, build_summary
from airflow_k8s_ml.workloads.checkpoint_io import format_history, parse_history
from airflow_k8s_ml.workloads.distributed import DistContext
from airflow_k8s_ml.workloads.finetune import epoch_metrics, progress_line
from airflow_k8s_ml.workloads.instances import Record

RECORD = {
    "epoch": 2,
    "step": 46,
    "train_loss": 0.41234,
    "val_loss": 0.3,
    "val_accuracy": 0.912,
    "epoch_seconds": 0.2,
}


def test_progress_line_format() -> None:
    line = progress_line(2, 5, 46, RECORD, DistContext())
    assert line == "epoch=2/5 step=46 loss=0.4123 val_accuracy=0.9120 val_loss=0.3000 seconds=0.20"
    assert re.match(r"^epoch=2/5 step=46 loss=\S+ val_accuracy=\S+", line)
    assert progress_line(2, 5, 46, RECORD, DistContext(2, 1, "h", 1)).endswith(" rank=1")


def test_epoch_metrics_are_what_the_gate_reads() -> None:
    assert epoch_metrics(RECORD) == {
        "val_accuracy": 0.912,
        "val_loss": 0.3,
        "train_loss": 0.41234,
        "epoch": 2,
        "global_step": 46,
    }


def test_history_roundtrip() -> None:
    data = format_history([RECORD, {**RECORD, "epoch": 3}])
    assert data.count(b"\n") == 2
    assert parse_history(data + b"\n") == [RECORD, {**RECORD, "epoch": 3}]


def test_summary_counts_histogram_and_accuracy() -> None:
    tally = Tally()
    tally.add([Record((0.0,) * 64, label=3), Record((0.0,) * 64, label=4), Record((0.0,) * 64)], [3, 3, 9])
    started = dt.datetime.now(dt.UTC)
    cfg = BatchConfig("s3://d/in", "s3://d/out", "s3://m/step-4/")
    summary = build_summary(cfg, tally, 4, [{"input": "a", "output": "b", "count": 3}], started)
    assert summary["count"] == 3 and summary["labeled_count"] == 2
    assert summary["accuracy"] == 0.5
    assert summary["class_histogram"] == {
        "0": 0,
        "1": 0,
        "2": 0,
        "3": 2,
        "4": 0,
        "5": 0,
        "6": 0,
        "7": 0,
        "8": 0,
        "9": 1,
    }
    assert (summary["model_uri"], summary["model_step"]) == ("s3://m/step-4/", 4)
    assert summary["duration_seconds"] >= 0
    assert build_summary(cfg, Tally(), 4, [], started)["accuracy"] is None
