"""Hostile checkpoint manifests served by a running ``airflow api-server``: its memory stays bounded.

Training code writes the manifests; the API server's Training tab reads them. Before the bounds
(issue 23), five 12 MB manifests took a real API server from 314 MB to 1393 MB of RSS, kept after the
request, and one manifest of 100,000 metrics made each tab answer 147 MB of HTML in 11 s.

Here the production tier's API server (its whole process tree, psutil) serves the tab's three answers
(the page, ``chart.svg``, ``data.json``) three times over for a task whose ``file://`` folder holds five
12 MB manifests and one of 100,000 metrics. Bounds stated here and in docs/ui.md: the tree's RSS grows
by less than :data:`RSS_BOUND_MB` over a warmed-up server, and every answer comes within
:data:`ANSWER_BOUND_S` (a bound that catches a hang; the measured figures are printed, run with ``-s``).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from airflow_k8s_ml.checkpoints import CheckpointWriter
from airflow_k8s_ml.checkpoints.manifest import FORMAT
from tests.production.conftest import Production

DAG_ID = "hostile_checkpoints"
RSS_BOUND_MB = 64
ANSWER_BOUND_S = 10.0
PATHS = (
    "/airflow-k8s-ml/training",
    "/airflow-k8s-ml/training/chart.svg",
    "/airflow-k8s-ml/training/data.json",
)


def _hand_written(base: Path, step: int, metrics: dict[str, Any], extra: Any = None) -> None:
    """A step folder as training code could write it, without the writer's checks."""
    folder = base / f"step-{step}"
    folder.mkdir(parents=True)
    (folder / "model.bin").write_bytes(b"m")
    body: dict[str, Any] = {
        "format": FORMAT,
        "step": step,
        "created_at": "2026-12-05T00:00:00.000Z",
        "metrics": metrics,
        "files": [{"path": "model.bin", "size": 1, "sha256": hashlib.sha256(b"m").hexdigest()}],
    }
    if extra is not None:
        body["extra"] = extra
    (folder / "MANIFEST.json").write_text(json.dumps(body))


def _tree_rss(pid: int) -> int:
    root = psutil.Process(pid)
    total = 0
    for proc in (root, *root.children(recursive=True)):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


def test_hostile_manifests_leave_the_api_servers_memory_bounded(
    production: Production, tmp_path: Path
) -> None:
    warm, hostile = tmp_path / "warm", tmp_path / "hostile"
    CheckpointWriter(f"file://{warm}").commit(1, {"model.bin": b"m"}, {"val_loss": 1.0})
    CheckpointWriter(f"file://{hostile}").commit(1, {"model.bin": b"m"}, {"val_loss": 1.0})
    # the newest complete checkpoint records 100,000 metrics; five newer manifests of 12 MB each (a
    # free-form ``extra`` of 12,000 entries) are refused, and the tab lists refused steps newer than the
    # newest complete one
    _hand_written(hostile, 2, {f"metric_{i:06d}": float(i) for i in range(100_000)} | {"val_loss": 0.1})
    blob = "x" * 1000
    for step in range(3, 8):
        _hand_written(hostile, step, {"val_loss": 1.0 / step}, {f"k{i}": blob for i in range(12_000)})
    assert (hostile / "step-3" / "MANIFEST.json").stat().st_size > 12_000_000

    runs = {
        name: production.rest.trigger(DAG_ID, {"checkpoint_uri": f"file://{folder}"})
        for name, folder in (("warm", warm), ("hostile", hostile))
    }
    for run_id in runs.values():
        assert production.rest.wait_run(DAG_ID, run_id, timeout=600)["state"] == "success"

    with httpx.Client(base_url=production.stack.url, timeout=ANSWER_BOUND_S * 3) as http:
        login = {"username": "admin", "password": production.stack.password}
        bearer = {"Authorization": f"Bearer {http.post('/auth/token', json=login).json()['access_token']}"}

        def answers(run_id: str) -> list[tuple[str, int, int, float]]:
            out = []
            for path in PATHS:
                query = {"dag_id": DAG_ID, "run_id": run_id, "task_id": "train", "map_index": -1}
                started = time.perf_counter()
                response = http.get(path, params=query, headers=bearer)
                seconds = time.perf_counter() - started
                assert response.status_code == 200, (path, response.status_code, response.text[:2000])
                out.append((path, response.status_code, len(response.content), seconds))
            return out

        api_server = production.stack.procs["api-server"].pid
        for _ in range(3):  # warm: every worker has loaded the plugin and rendered a tab
            answers(runs["warm"])
        before = _tree_rss(api_server)
        timings: list[tuple[str, int, int, float]] = []
        for _ in range(3):
            timings += answers(runs["hostile"])
        grown = (_tree_rss(api_server) - before) / 2**20
        page = http.get(
            PATHS[0],
            params={"dag_id": DAG_ID, "run_id": runs["hostile"], "task_id": "train", "map_index": -1},
            headers=bearer,
        ).text

    slowest = max(timings, key=lambda t: t[3])
    largest = max(timings, key=lambda t: t[2])
    print(
        f"api-server tree RSS {before / 2**20:.0f} MB -> +{grown:.1f} MB after 9 answers on five 12 MB "
        f"manifests and one of 100,000 metrics; slowest answer {slowest[3]:.2f} s ({slowest[0]}), largest "
        f"{largest[2]:,} bytes ({largest[0]})"
    )
    assert grown < RSS_BOUND_MB, f"the api-server tree grew by {grown:.0f} MB (bound {RSS_BOUND_MB} MB)"
    assert slowest[3] < ANSWER_BOUND_S, f"{slowest[0]} took {slowest[3]:.1f} s (bound {ANSWER_BOUND_S} s)"
    assert page.count("MANIFEST.json too large") >= 5, page[-5000:]
    assert "more metrics not drawn" in page, page[-5000:]
    assert largest[2] < 1_000_000, f"{largest[0]} answered {largest[2]:,} bytes"
