"""``finetune`` as the two replicas of a PyTorchJob would start it: DDP over gloo on 127.0.0.1."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from airflow_k8s_ml.checkpoints import download_checkpoint

PROGRESS = re.compile(r"^epoch=(\d+)/2 step=(\d+) loss=([\d.]+) val_accuracy=([\d.]+) .* rank=(\d)$", re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_ranks_train_together_and_only_rank_0_commits(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/ckpt"
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if k not in {"RESUME_FROM", "BASE_MODEL", "EPOCHS"}}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "airflow_k8s_ml.workloads.finetune",
                "--checkpoint-uri",
                base,
                "--epochs",
                "2",
            ],
            env=clean
            | {
                "WORLD_SIZE": "2",
                "RANK": str(rank),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "DIST_TIMEOUT_SECONDS": "60",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err

    (out0, _), (out1, _) = outputs
    assert "world_size=2 rank=0" in out0 and "world_size=2 rank=1" in out1
    lines0, lines1 = PROGRESS.findall(out0), PROGRESS.findall(out1)
    assert [line[4] for line in lines0] == ["0", "0"] and [line[4] for line in lines1] == ["1", "1"]
    # same synchronized model -> identical loss and validation numbers on both ranks
    assert [line[:4] for line in lines0] == [line[:4] for line in lines1]
    # each rank does half the steps a single process would (1438 rows / 2 ranks / 64 per batch = 12 steps)
    assert [line[1] for line in lines0] == ["12", "24"]

    assert "checkpoint step=2" in out0 and "checkpoint step=" not in out1
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step-1", "step-2"]
    manifest = download_checkpoint(f"{base}/step-2/", str(tmp_path / "dl"), verify=True)
    assert manifest.metrics["val_accuracy"] == pytest.approx(float(lines0[1][3]), abs=1e-4)
    assert manifest.metrics["val_accuracy"] > 0.8
