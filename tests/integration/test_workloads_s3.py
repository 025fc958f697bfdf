"""The workloads against the embedded S3 endpoint (moto over real HTTP), configured only by AWS_* env vars.

``seed`` and ``batch_predict`` run as subprocesses that inherit the env exactly as a pod gets it from its
Secret; a resume from an S3 checkpoint runs in-process to keep the file fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from airflow_k8s_ml.checkpoints import download_checkpoint
from airflow_k8s_ml.workloads import finetune, io
from airflow_k8s_ml.workloads.cli import run_entrypoint


def run(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"MODEL_URI", "INPUT_URI", "OUTPUT_URI", "RESUME_FROM"}
    }
    return subprocess.run(
        [sys.executable, "-m", f"airflow_k8s_ml.workloads.{name}", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_seed_batch_predict_and_resume_on_s3(s3_bucket: str, tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    models, inputs, outputs = (
        f"s3://{s3_bucket}/{p}" for p in ("models/digits", "data/in", "data/out/run-1")
    )
    proc = run(
        "seed", "--base-model-uri", models, "--input-uri", inputs, "--batches", "2", "--rows-per-batch", "20"
    )
    assert proc.returncode == 0, proc.stderr
    assert io.list_files(inputs) == [f"{inputs}/batch-000.csv", f"{inputs}/batch-001.jsonl"]

    proc = run(
        "batch_predict", "--input-uri", inputs, "--output-uri", outputs, "--model-uri", f"{models}/step-1/"
    )
    assert proc.returncode == 0, proc.stderr
    assert io.list_files(outputs) == [
        f"{outputs}/predictions-batch-000.jsonl",
        f"{outputs}/predictions-batch-001.jsonl",
    ]
    summary = json.loads(io.read_bytes(f"{outputs}/_SUMMARY.json"))
    assert (summary["count"], summary["model_uri"], summary["model_step"]) == (40, f"{models}/step-1/", 1)
    assert len(io.read_bytes(f"{outputs}/predictions-batch-001.jsonl").decode().splitlines()) == 20

    # rerunning seed keeps the committed base model instead of failing on "already committed"
    again = run("seed", "--base-model-uri", models)
    assert again.returncode == 0 and "already committed" in again.stdout, again.stderr

    # resume from the S3 checkpoint, commit the next epoch to S3
    for name in ("RESUME_FROM", "BASE_MODEL", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    code = run_entrypoint(
        finetune.main, ["--checkpoint-uri", models, "--epochs", "2", "--resume-from", f"{models}/step-1/"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"checkpoint step=2 uri={models}/step-2/" in out
    manifest = download_checkpoint(f"{models}/step-2/", str(tmp_path / "dl"), verify=True)
    assert manifest.metrics["epoch"] == 2
    history = (tmp_path / "dl" / "history.jsonl").read_text().splitlines()
    assert [json.loads(h)["epoch"] for h in history] == [1, 2]
