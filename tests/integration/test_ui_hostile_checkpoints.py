"""Checkpoint folders written by hostile training code, read as the Training tab and the gate read them.

Training code writes the manifests and the step folders; the api-server (the tab) and the operators (gate,
resume) read them. Each case here was an attack that worked: a 12 MB manifest, 100,000 metrics, a NaN, a
symlinked step folder or file. The reader is the tab's real one on real files, the page and ``data.json``
are rendered as the app answers them; memory is the process's own RSS (``/proc/self/statm``).

Bounds stated (and asserted): five manifests of 12 MB each cost the reading process under 40 MB of RSS; a
manifest of 100,000 metrics gives a tab under 200 kB answered in under 2 s; a symlink to ``/usr`` costs
under 0.5 s and leaks no size.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse

from airflow_k8s_ml.checkpoints import CheckpointStore, CheckpointWriter
from airflow_k8s_ml.checkpoints.manifest import FORMAT, MAX_MANIFEST_BYTES
from airflow_k8s_ml.ui.facts import TaskFacts
from airflow_k8s_ml.ui.history import HistoryReader
from airflow_k8s_ml.ui.page import training_page
from airflow_k8s_ml.ui.svg import render_chart
from airflow_k8s_ml.ui.view import MAX_DRAWN, build_view

PAGE = resource.getpagesize()


def _rss() -> int:
    gc.collect()
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


def _facts(uri: str) -> TaskFacts:
    return TaskFacts(
        dag_id="nightly_finetune",
        run_id="manual__1",
        task_id="fine_tune_job",
        map_index=-1,
        operator="FineTuneJobOperator",
        state="success",
        try_number=1,
        rendered={"checkpoint_uri": uri},
    )


def _hand_written(base: Path, step: int, metrics: dict[str, Any], extra: Any = None) -> None:
    """A step folder as training code could write it without the writer's checks."""
    folder = base / f"step-{step}"
    folder.mkdir(parents=True)
    (folder / "model.bin").write_bytes(b"m")
    body = {
        "format": FORMAT,
        "step": step,
        "created_at": "2026-12-05T00:00:00.000Z",
        "metrics": metrics,
        "files": [
            {
                "path": "model.bin",
                "size": 1,
                "sha256": hashlib.sha256(b"m").hexdigest(),
            }
        ],
    }
    if extra is not None:
        body["extra"] = extra
    (folder / "MANIFEST.json").write_text(json.dumps(body))


def _tab(uri: str, reader: HistoryReader) -> tuple[str, dict[str, Any], float]:
    started = time.perf_counter()
    view = build_view(_facts(uri), reader.read(uri), now=time.time())
    page = training_page(view)
    data = json.loads(JSONResponse(view.to_json()).body)
    return page, data, time.perf_counter() - started


def test_huge_manifests_are_refused_unread_and_cost_the_reader_no_memory(tmp_path: Path) -> None:
    base = tmp_path / "ckpt"
    CheckpointWriter(f"file://{base}").commit(1, {"model.bin": b"m"}, {"val_loss": 1.0})
    blob = "x" * 1000
    for step in range(2, 7):  # five manifests of 12 MB, a free-form ``extra`` of 12,000 entries
        _hand_written(base, step, {"val_loss": 1.0 / step}, {f"k{i}": blob for i in range(12_000)})
    reader = HistoryReader()
    before = _rss()
    for _ in range(3):
        history = reader.read(f"file://{base}")
    extra = _rss() - before
    print(f"huge manifests: reader RSS +{extra / 1e6:.1f} MB")
    assert extra < 40 * 1024 * 1024, f"the reader kept {extra / 1e6:.0f} MB"
    problems = {p.step: p.problem for p in history.points if not p.complete}
    assert sorted(problems) == [2, 3, 4, 5, 6]
    assert all("MANIFEST.json too large" in str(text) for text in problems.values())
    page, data, _ = _tab(f"file://{base}", reader)
    assert "MANIFEST.json too large" in page and data["latest"]["step"] == 1
    # the gate and resume read through the store: the same limit, the same words
    store = CheckpointStore(f"file://{base}")
    assert store.latest_complete().step == 1  # type: ignore[union-attr]
    refused = [c for c in store.list() if not c.complete]
    assert len(refused) == 5 and all("too large" in str(c.problem) for c in refused)
    assert (base / "step-2" / "MANIFEST.json").stat().st_size > MAX_MANIFEST_BYTES


def test_a_manifest_under_the_limit_keeps_no_free_form_field_in_the_cache(tmp_path: Path) -> None:
    base = tmp_path / "ckpt"
    blob = "y" * 1000
    for step in range(1, 11):  # ten manifests of 3.5 MB of ``extra``
        _hand_written(base, step, {"val_loss": 1.0 / step}, {f"k{i}": blob for i in range(3_500)})
    reader = HistoryReader()
    reader.read(f"file://{base}")
    before = _rss()
    history = reader.read(f"file://{base}")
    assert history.manifests_fetched == 0  # served from the cache
    assert len(history.complete) == 10
    assert _rss() - before < 10 * 1024 * 1024
    assert all(not entry[0].manifest.extra for entry in reader._manifests.values())  # what the cache holds


def test_a_hundred_thousand_metrics_give_a_small_tab_that_names_what_it_left_out(tmp_path: Path) -> None:
    base = tmp_path / "ckpt"
    _hand_written(base, 1, {f"metric_{i:06d}": float(i) for i in range(100_000)} | {"val_loss": 0.5})
    reader = HistoryReader()
    page, data, seconds = _tab(f"file://{base}", reader)
    print(f"100,000 metrics: tab {seconds:.3f} s, {len(page):,} characters")
    assert seconds < 2.0, f"the tab took {seconds:.2f} s"
    assert len(page) < 200_000, f"the tab is {len(page)} characters"
    assert "val_loss" in data["series"] and len(data["series"]) <= MAX_DRAWN
    assert "more metrics not drawn" in page and "record more metrics than the tab reads" in page
    svg = render_chart(
        build_view(_facts(f"file://{base}"), reader.read(f"file://{base}"), now=0).series, (), "t"
    )
    assert svg.count('class="point"') <= MAX_DRAWN


def test_nan_and_infinite_metrics_are_shown_never_a_500(tmp_path: Path) -> None:
    base = tmp_path / "ckpt"
    CheckpointWriter(f"file://{base}").commit(1, {"model.bin": b"m"}, {"val_loss": 1.0})
    (base / "step-2").mkdir()
    (base / "step-2" / "model.bin").write_bytes(b"m")
    manifest = json.loads((base / "step-1" / "MANIFEST.json").read_text())
    manifest.update(step=2, metrics={"val_loss": float("nan"), "train_loss": float("inf")})
    (base / "step-2" / "MANIFEST.json").write_text(json.dumps(manifest))  # json writes NaN, Infinity
    page, data, _ = _tab(f"file://{base}", HistoryReader())
    assert data["latest"]["metrics"] == {"val_loss": "nan", "train_loss": "inf"}
    assert [pair[0] for pair in data["series"]["val_loss"]] == [1]  # drawn: the finite value only
    assert "nan" in page and "inf" in page


def test_a_symlinked_step_or_file_is_refused_and_never_walked(tmp_path: Path) -> None:
    base = tmp_path / "ckpt"
    writer = CheckpointWriter(f"file://{base}")
    writer.commit(1, {"model.bin": b"m"}, {"val_loss": 1.0})
    writer.commit(2, {"model.bin": b"mm"}, {"val_loss": 0.5})
    os.symlink("/usr", base / "step-9")
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"s" * 123_457)
    (base / "step-2" / "model.bin").unlink()
    os.symlink(secret, base / "step-2" / "model.bin")
    started = time.perf_counter()
    history = HistoryReader().read(f"file://{base}")
    took = time.perf_counter() - started
    assert took < 10, f"reading the history took {took:.1f} s: the step-9 link to /usr was followed?"
    problems = {p.step: p.problem for p in history.points}
    assert problems[9] == "step-9 is a symbolic link: refused"
    assert problems[2] == "step-2/model.bin is a symbolic link: refused"
    assert history.latest is not None and history.latest.step == 1
    page, data, _ = _tab(f"file://{base}", HistoryReader())
    assert "123457" not in page and "123,457" not in page and "123457" not in json.dumps(data)
    store = CheckpointStore(f"file://{base}")
    assert store.latest_complete().step == 1  # type: ignore[union-attr]
    by_step = {c.step: c for c in store.list()}
    assert by_step[9].problem == "step-9 is a symbolic link: refused"
    assert by_step[2].problem == "step-2/model.bin is a symbolic link: refused"
    assert store.verify(f"file://{base}/step-2/", "full") == ["step-2/model.bin is a symbolic link: refused"]
