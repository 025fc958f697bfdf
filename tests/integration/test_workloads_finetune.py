"""``finetune`` as a pod runs it: a subprocess writing file:// checkpoints, failing, resuming, warm-starting.

Subprocess runs cost ~2.5 s each, nearly all torch import (torch.optim also pulls in torch._dynamo), so one
2-epoch run is shared through a module fixture, and follow-up runs that only compare numbers run in-process
through the same ``main`` + exit-code mapping that the ``__main__`` block uses.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from airflow_k8s_ml.checkpoints import download_checkpoint
from airflow_k8s_ml.workloads import finetune
from airflow_k8s_ml.workloads.cli import run_entrypoint

PROGRESS = re.compile(
    r"^epoch=(?P<epoch>\d+)/(?P<epochs>\d+) step=(?P<step>\d+) loss=(?P<loss>[\d.]+) "
    r"val_accuracy=(?P<acc>[\d.]+) val_loss=(?P<val_loss>[\d.]+)",
    re.M,
)
WORKLOAD_VARS = {
    "WORLD_SIZE",
    "RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RESUME_FROM",
    "BASE_MODEL",
    "EPOCHS",
    "CHECKPOINT_URI",
    "FAIL_AT_EPOCH",
    "SLEEP_PER_EPOCH",
    "LR",
    "SEED",
    "MAX_TRAIN_SAMPLES",
}


def run_finetune(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m airflow_k8s_ml.workloads.finetune`` with a clean workload environment."""
    full_env = {k: v for k, v in os.environ.items() if k not in WORKLOAD_VARS} | env
    return subprocess.run(
        [sys.executable, "-m", "airflow_k8s_ml.workloads.finetune", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def run_in_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, **env: str
) -> tuple[int, str, str]:
    """The same entrypoint in this process (torch already imported): exit code, stdout, stderr."""
    for name in WORKLOAD_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = run_entrypoint(finetune.main, list(args))
    out, err = capsys.readouterr()
    return code, out, err


def fetch(uri: str, dest: Path) -> tuple[Any, list[dict[str, Any]]]:
    """Manifest and history of a committed checkpoint (verified download)."""
    manifest = download_checkpoint(uri, str(dest), verify=True)
    history = [json.loads(line) for line in (dest / "history.jsonl").read_text().splitlines()]
    return manifest, history


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, subprocess.CompletedProcess[str]]:
    base = f"file://{tmp_path_factory.mktemp('run-a')}/ckpt"
    return base, run_finetune("--checkpoint-uri", base, "--epochs", "2", "--seed", "7")


def test_writes_a_checkpoint_every_epoch_with_metrics(two_epochs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base, proc = two_epochs
    assert proc.returncode == 0, proc.stderr
    lines = [m.groupdict() for m in PROGRESS.finditer(proc.stdout)]
    assert [(m["epoch"], m["epochs"]) for m in lines] == [("1", "2"), ("2", "2")]
    assert int(lines[1]["step"]) == 2 * int(lines[0]["step"]) > 0
    assert f"checkpoint step=2 uri={base}/step-2/" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("done epoch=2/2 val_accuracy=")

    for step in (1, 2):
        manifest, history = fetch(f"{base}/step-{step}/", tmp_path / f"s{step}")
        assert manifest.step == step
        assert {"val_accuracy", "val_loss", "train_loss", "epoch"} <= set(manifest.metrics)
        assert manifest.metrics["epoch"] == step
        assert manifest.metrics["val_accuracy"] == pytest.approx(float(lines[step - 1]["acc"]), abs=1e-4)
        assert [h["epoch"] for h in history] == list(range(1, step + 1))
        assert {p.name for p in (tmp_path / f"s{step}").iterdir()} >= {"model.pt", "trainer_state.pt"}
    assert manifest.metrics["val_accuracy"] > 0.85  # real learning on the real data set


def test_resume_from_step_2_continues_at_epoch_3(two_epochs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base, _ = two_epochs
    out = f"file://{tmp_path}/resumed"
    proc = run_finetune(
        "--checkpoint-uri", out, "--epochs", "3", "--seed", "7", RESUME_FROM=f"{base}/step-2/"
    )
    assert proc.returncode == 0, proc.stderr
    assert "start_epoch=3" in proc.stdout
    assert [m["epoch"] for m in PROGRESS.finditer(proc.stdout)] == ["3"]
    manifest, history = fetch(f"{out}/step-3/", tmp_path / "s3")
    _, history2 = fetch(f"{base}/step-2/", tmp_path / "s2")
    assert manifest.metrics["epoch"] == 3
    assert history[:2] == history2  # the curve continues, it does not restart
    assert history[2]["step"] == 3 * history[0]["step"]  # global step continues too
    assert not (tmp_path / "resumed" / "step-1").exists()


def test_injected_failure_exits_3_before_its_checkpoint_and_resume_is_exact(
    two_epochs,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Epoch 3 of an uninterrupted run (printed just before the injected failure) equals epoch 3 of a run
    resumed from step 2: the optimizer state and the per-epoch shuffle are restored, not just the weights."""
    failing = f"file://{tmp_path}/failing"
    proc = run_finetune("--checkpoint-uri", failing, "--epochs", "3", "--seed", "7", "--fail-at-epoch", "3")
    assert proc.returncode == 3
    assert "injected failure at epoch 3" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "failing").iterdir()) == ["step-1", "step-2"]
    uninterrupted = [m.groupdict() for m in PROGRESS.finditer(proc.stdout)]

    code, out, err = run_in_process(
        monkeypatch,
        capsys,
        "--checkpoint-uri",
        f"file://{tmp_path}/r",
        "--epochs",
        "3",
        "--seed",
        "7",
        RESUME_FROM=f"{failing}/step-2/",
    )
    assert code == 0, err
    [after_resume] = [m.groupdict() for m in PROGRESS.finditer(out)]
    assert after_resume == uninterrupted[2]
    # and the failing run's first two epochs match the fixture's, so seeded runs are reproducible
    assert [m.groupdict() for m in PROGRESS.finditer(two_epochs[1].stdout)] == [
        {**u, "epochs": "2"} for u in uninterrupted[:2]
    ]


def test_warm_start_from_a_base_model(two_epochs, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    base, proc_a = two_epochs
    out_uri = f"file://{tmp_path}/warm"
    code, out, err = run_in_process(
        monkeypatch,
        capsys,
        "--checkpoint-uri",
        out_uri,
        "--epochs",
        "1",
        "--seed",
        "7",
        BASE_MODEL=f"{base}/step-2/",
    )
    assert code == 0, err
    assert f"base_model={base}/step-2/ base_step=2" in out
    warm = next(PROGRESS.finditer(out))
    cold = next(PROGRESS.finditer(proc_a.stdout))
    assert warm["epoch"] == "1"  # a warm start is a new run: epochs and checkpoint steps restart at 1
    assert float(warm["val_loss"]) < float(cold["val_loss"])
    manifest, history = fetch(f"{out_uri}/step-1/", tmp_path / "w1")
    assert manifest.step == 1 and len(history) == 1


def test_bad_arguments_fail_with_a_message(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    proc = run_finetune("--checkpoint-uri", f"file://{tmp_path}/x", "--epochs", "0")
    assert proc.returncode == 2
    assert "error: invalid argument epochs: must be >= 1" in proc.stderr
    code, _, err = run_in_process(
        monkeypatch,
        capsys,
        "--checkpoint-uri",
        f"file://{tmp_path}/x",
        RESUME_FROM=f"file://{tmp_path}/no/step-4/",
    )
    assert code == 1
    assert "has no MANIFEST.json" in err
    assert not (tmp_path / "x").exists()
