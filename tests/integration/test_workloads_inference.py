"""``serve`` and ``batch_predict`` as subprocesses on file:// URIs, with a model and inputs from ``seed``.

Predictions are checked against the same checkpoint loaded in this process, so the assertions hold for any
model quality (the seeded base model is deliberately weak).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from airflow_k8s_ml.workloads.checkpoint_io import load_checkpoint
from airflow_k8s_ml.workloads.dataset import load_digits, train_val
from airflow_k8s_ml.workloads.model import predict

CLEAN_ENV = {
    k: v for k, v in os.environ.items() if k not in {"MODEL_URI", "INPUT_URI", "OUTPUT_URI", "POD_IP", "PORT"}
}


def module_cmd(name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"airflow_k8s_ml.workloads.{name}", *args]


def run(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(module_cmd(name, *args), capture_output=True, text=True, env=CLEAN_ENV, timeout=120)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("seeded")
    proc = run("seed", "--base-model-uri", f"file://{root}/models", "--input-uri", f"file://{root}/in")
    assert proc.returncode == 0, proc.stderr
    assert f"done base_model_uri=file://{root}/models/step-1/" in proc.stdout
    return {"model_uri": f"file://{root}/models/step-1/", "input_uri": f"file://{root}/in", "root": str(root)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(method: str, url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def server(seeded: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    proc = subprocess.Popen(
        module_cmd("serve", "--port", str(port)),
        env=CLEAN_ENV | {"MODEL_URI": seeded["model_uri"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def wait_for_status(url: str, proc: subprocess.Popen[str], want: int, timeout: float = 30) -> list[int]:
    """Poll ``url`` until it answers ``want``; return every status seen (connection refused is skipped)."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            status, _ = http("GET", url)
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.02)
            continue
        seen.append(status)
        if status == want:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"{url} never answered {want}; saw {seen}")


def test_serve_probes_predict_and_sigterm(seeded: dict[str, str], server) -> None:  # type: ignore[no-untyped-def]
    url, proc = server
    wait_for_status(f"{url}/healthz", proc, 200)
    readiness = wait_for_status(f"{url}/readyz", proc, 200)
    assert readiness[0] == 503  # live before the model is loaded, ready only after
    status, body = http("GET", f"{url}/readyz")
    assert (status, body["step"], body["model_uri"]) == (200, 1, seeded["model_uri"])

    _, held_out = train_val(load_digits())
    rows = [list(r) for r in held_out.features[:20]]
    status, body = http("POST", f"{url}/predict", {"instances": rows})
    assert status == 200, body
    expected = predict(load_checkpoint(seeded["model_uri"]).model, [tuple(r) for r in rows])
    assert body == {"predictions": expected, "model_uri": seeded["model_uri"], "step": 1}

    for payload, field in (({"instances": [[1, 2]]}, "instances[0]"), ({"rows": rows}, "instances")):
        status, body = http("POST", f"{url}/predict", payload)
        assert status == 400 and body["field"] == field and body["error"]
    status, body = http("POST", f"{url}/predict", raw=b"{nope")
    assert status == 400 and "invalid JSON" in body["error"]
    assert http("GET", f"{url}/predict")[0] == 404

    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "signal SIGTERM: shutting down" in out and out.rstrip().endswith("serve stopped")


def test_serve_exits_1_when_the_model_cannot_load(tmp_path: Path) -> None:
    proc = run("serve", "--port", "0", "--model-uri", f"file://{tmp_path}/missing/step-1/")
    assert proc.returncode == 1
    assert "cannot load model" in proc.stderr and "MANIFEST.json" in proc.stderr


def test_batch_predict_writes_predictions_and_summary(seeded: dict[str, str], tmp_path: Path) -> None:
    out_uri = f"file://{tmp_path}/out"
    proc = run(
        "batch_predict",
        "--input-uri",
        seeded["input_uri"],
        "--output-uri",
        out_uri,
        "--model-uri",
        seeded["model_uri"],
    )
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["_SUMMARY.json", *(f"predictions-batch-00{i}.jsonl" for i in range(3))]

    lines = [json.loads(x) for n in names[1:] for x in (tmp_path / "out" / n).read_text().splitlines()]
    _, held_out = train_val(load_digits())
    expected = predict(load_checkpoint(seeded["model_uri"]).model, list(held_out.features[:150]))
    assert [x["prediction"] for x in lines] == expected  # seeded inputs are the first 150 held-out rows
    assert [x["label"] for x in lines] == list(held_out.labels[:150])
    assert [x["row"] for x in lines[:50]] == list(range(50))
    assert lines[50]["id"] == "batch-001-0000" and lines[50]["source"] == "batch-001.jsonl"

    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["count"] == summary["labeled_count"] == 150
    assert sum(summary["class_histogram"].values()) == 150
    assert summary["class_histogram"] == {str(k): expected.count(k) for k in range(10)}
    assert summary["accuracy"] == pytest.approx(sum(x["prediction"] == x["label"] for x in lines) / 150)
    assert (summary["model_uri"], summary["model_step"]) == (seeded["model_uri"], 1)
    assert summary["duration_seconds"] >= 0 and len(summary["files"]) == 3
    assert f"done count=150 files=3 accuracy={summary['accuracy']:.4f}" in proc.stdout


def test_batch_predict_fails_on_an_empty_input_prefix(seeded: dict[str, str], tmp_path: Path) -> None:
    proc = run(
        "batch_predict",
        "--input-uri",
        f"file://{tmp_path}/empty",
        "--output-uri",
        f"file://{tmp_path}/out",
        "--model-uri",
        seeded["model_uri"],
    )
    assert proc.returncode == 2
    assert "no batch files" in proc.stderr
    assert not (tmp_path / "out").exists()
