"""Checkpoints against the embedded S3 endpoint over real HTTP: commit, newest complete, zero-download verify,
racing commits, multipart checksums, download and resume.

Writers build their boto3 client from the environment (as pods do); stores build theirs from the Airflow
connection ``AIRFLOW_CONN_AWS_DEFAULT`` (as operators do). Requests are counted at the client with botocore's
event hooks, so "downloads zero bytes" is observed, not assumed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.checkpoints import CheckpointStore, CheckpointWriter, download_checkpoint, resolve_resume
from airflow_k8s_ml.checkpoints.s3_backend import S3Backend
from airflow_k8s_ml.errors import CheckpointError
from airflow_k8s_ml.testbed.local_s3 import LocalS3


class RequestLog:
    """Every S3 operation a client sends (name, key) and the bytes GetObject returned."""

    def __init__(self, client: Any) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.bytes_downloaded = 0
        client.meta.events.register("before-parameter-build.s3", self._before)
        client.meta.events.register("after-call.s3.GetObject", self._after_get)

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls.append((model.name, params.get("Key")))

    def _after_get(self, parsed: dict[str, Any], **_: Any) -> None:
        self.bytes_downloaded += int(parsed.get("ContentLength") or 0)

    def ops(self) -> Counter[str]:
        return Counter(op for op, _ in self.calls)

    def data_gets(self) -> list[str]:
        return [
            k or "" for op, k in self.calls if op == "GetObject" and not (k or "").endswith("MANIFEST.json")
        ]


def _files(tmp_path: Path, step: int, sizes: tuple[int, ...] = (4096, 1024)) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {"config.json": b'{"lr": 0.1}'}
    for i, size in enumerate(sizes):
        path = tmp_path / f"s{step}-shard{i}.bin"
        path.write_bytes(os.urandom(size))
        files[f"shards/{i}.bin"] = str(path)
    return files


def _commit_steps(base: str, tmp_path: Path, steps: range) -> list[str]:
    writer = CheckpointWriter(base)
    return [
        writer.commit(s, _files(tmp_path, s), metrics={"val_accuracy": 0.8 + s / 100}, framework="pytorch")
        for s in steps
    ]


def _key(store: CheckpointStore, uri: str, path: str) -> str:
    """The S3 key of ``path`` inside the checkpoint at ``uri`` (data sits under a per-commit folder)."""
    entry = next(f for f in store.get(uri).files if f.path == path)
    return f"{uri.split('/', 3)[3]}{entry.storage_key}"


def test_round_trip_newest_complete_ignores_incomplete_steps(
    s3_bucket: str, local_s3: LocalS3, tmp_path
) -> None:
    base = f"s3://{s3_bucket}/models/run1"
    uris = _commit_steps(base, tmp_path, range(1, 4))
    assert uris == [f"{base}/step-{s}/" for s in (1, 2, 3)]
    store = CheckpointStore(base, aws_conn_id="aws_default")
    latest = store.latest_complete()
    assert latest is not None and latest.step == 3
    assert latest.metrics == {"val_accuracy": pytest.approx(0.83)} and latest.created_at
    assert sorted(f.path for f in latest.files) == ["config.json", "shards/0.bin", "shards/1.bin"]

    raw = local_s3.client()
    raw.delete_object(Bucket=s3_bucket, Key=_key(store, uris[2], "shards/1.bin"))
    raw.put_object(Bucket=s3_bucket, Key="models/run1/step-4/data-x/shards/0.bin", Body=b"half an upload")
    assert store.latest_complete().step == 2  # type: ignore[union-attr]
    listed = {c.step: c for c in store.list()}
    assert [s for s, c in listed.items() if c.complete] == [1, 2]
    assert listed[3].problem == "shards/1.bin: missing (listed in MANIFEST.json, not in storage)"
    assert listed[4].problem == "no MANIFEST.json (1 objects; upload unfinished or abandoned)"


def test_store_reaches_the_endpoint_through_the_airflow_connection(
    s3_bucket: str, local_s3: LocalS3, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = f"s3://{s3_bucket}/run"
    _commit_steps(base, tmp_path, range(1, 2))
    for var in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)  # only the connection's extra.endpoint_url and login/password remain
    store = CheckpointStore(base, aws_conn_id="aws_default")
    assert store.s3_client.meta.endpoint_url == local_s3.endpoint_url
    assert store.latest_complete().step == 1  # type: ignore[union-attr]


def test_checksum_verify_downloads_no_data_and_catches_changed_size_and_content(
    s3_bucket: str, local_s3: LocalS3, tmp_path
) -> None:
    base = f"s3://{s3_bucket}/run"
    (uri,) = _commit_steps(base, tmp_path, range(1, 2))
    store = CheckpointStore(base)
    log = RequestLog(store.s3_client)

    assert store.verify(uri) == []
    assert log.ops()["HeadObject"] == 3 and log.data_gets() == []

    raw = local_s3.client()
    same_size = _key(store, uri, "shards/0.bin")
    other_size = _key(store, uri, "shards/1.bin")
    # Replaced after the commit, uploaded with a SHA-256 checksum so S3 records the new (different) one.
    raw.put_object(Bucket=s3_bucket, Key=same_size, Body=os.urandom(4096), ChecksumAlgorithm="SHA256")
    raw.put_object(Bucket=s3_bucket, Key=other_size, Body=os.urandom(1000), ChecksumAlgorithm="SHA256")
    log.calls.clear()
    log.bytes_downloaded = 0

    problems = store.verify(uri, mode="checksums")
    assert len(problems) == 2
    assert any(p.startswith("shards/0.bin: stored SHA-256 ") and "differs" in p for p in problems)
    assert "shards/1.bin: size 1000 in storage, 1024 in MANIFEST.json" in problems
    assert log.data_gets() == []  # zero data objects fetched; only MANIFEST.json was read
    assert log.bytes_downloaded < 2048

    log.calls.clear()
    log.bytes_downloaded = 0
    full = store.verify(uri, mode="full")
    assert "shards/1.bin: size 1000 in storage, 1024 in MANIFEST.json" in full  # known from the listing
    assert any(p.startswith("shards/0.bin: sha256 ") for p in full)
    assert sorted(k.rsplit("/", 1)[1] for k in log.data_gets()) == ["0.bin", "config.json"]
    assert log.bytes_downloaded >= 4096
    assert store.latest_complete() is None


def test_object_replaced_without_a_checksum_is_not_silently_trusted(
    s3_bucket: str, local_s3: LocalS3, tmp_path
):
    base = f"s3://{s3_bucket}/run"
    (uri,) = _commit_steps(base, tmp_path, range(1, 2))
    store = CheckpointStore(base)
    config_key = _key(store, uri, "config.json")
    local_s3.client().put_object(
        Bucket=s3_bucket, Key=config_key, Body=b'{"lr": 0.1}'
    )  # same bytes, no checksum
    assert store.verify(uri) == [
        "config.json: storage holds no SHA-256 checksum (replaced after commit?); use verify='full'"
    ]
    assert store.verify(uri, mode="full") == []


def test_racing_commits_exactly_one_wins(s3_bucket: str, local_s3: LocalS3) -> None:
    base = f"s3://{s3_bucket}/race"
    k = 8
    barrier, outcomes = threading.Barrier(k), []
    # One client per writer, as separate pods would have; built before the race so they all start together.
    writers = [CheckpointWriter(base, s3_client=local_s3.client()) for _ in range(k)]

    def commit(i: int) -> None:
        writer = writers[i]
        payload = os.urandom(64 * 1024) + bytes([i])
        barrier.wait()
        try:
            writer.commit(7, {"model.pt": payload, "rank.txt": str(i).encode()}, metrics={"writer": i})
            outcomes.append(("won", i))
        except CheckpointError as exc:
            outcomes.append(("lost", str(exc)))

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o[0] == "won"]
    assert len(winners) == 1, outcomes
    assert all("committed" in str(msg) for kind, msg in outcomes if kind == "lost")
    store = CheckpointStore(base)
    assert store.verify(f"{base}/step-7/", mode="full") == []  # the winner's bytes, never a mix
    assert store.get(f"{base}/step-7/").metrics == {"writer": float(winners[0][1])}
    keys = [o["Key"] for o in local_s3.client().list_objects_v2(Bucket=s3_bucket, Prefix="race/")["Contents"]]
    assert len(keys) == 3  # MANIFEST.json + the winner's two files: losers deleted their staged data


def test_multipart_upload_records_the_composite_checksum(s3_bucket: str, tmp_path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(10 * 1024 * 1024 + 12345))
    writer = CheckpointWriter(f"s3://{s3_bucket}/mp")
    backend = writer.backend
    assert isinstance(backend, S3Backend)
    backend.multipart_threshold, backend.part_size = 6 * 1024 * 1024, 5 * 1024 * 1024
    uri = writer.commit(1, {"big.bin": str(big)})
    store = CheckpointStore(f"s3://{s3_bucket}/mp")
    (entry,) = store.get(uri).files
    assert entry.s3_checksum is not None and entry.s3_checksum.endswith("-3")
    assert entry.sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert store.verify(uri) == [] and store.verify(uri, mode="full") == []


def test_download_checkpoint_with_env_credentials(s3_bucket: str, local_s3: LocalS3, tmp_path) -> None:
    base = f"s3://{s3_bucket}/dl"
    (uri,) = _commit_steps(base, tmp_path, range(5, 6))
    manifest = download_checkpoint(uri, str(tmp_path / "out"))
    assert manifest.step == 5 and manifest.framework == "pytorch"
    for entry in manifest.files:
        assert hashlib.sha256((tmp_path / "out" / entry.path).read_bytes()).hexdigest() == entry.sha256

    key = _key(CheckpointStore(base), uri, "shards/0.bin")
    local_s3.client().put_object(Bucket=s3_bucket, Key=key, Body=os.urandom(4096))
    with pytest.raises(CheckpointError, match=r"shards/0.bin: sha256 "):
        download_checkpoint(uri, str(tmp_path / "out2"))
    assert not list((tmp_path / "out2").rglob("0.bin*"))
    with pytest.raises(CheckpointError, match=r"no MANIFEST\.json"):
        download_checkpoint(f"{base}/step-6/", str(tmp_path / "out3"))


def test_resolve_resume(
    s3_bucket: str, local_s3: LocalS3, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    base = f"s3://{s3_bucket}/resume"
    assert resolve_resume(None, base) is None
    with caplog.at_level(logging.INFO, logger="airflow_k8s_ml.checkpoints.resume"):
        assert resolve_resume("latest", base) is None
    assert f"no complete checkpoint under {base}, starting fresh" in caplog.text

    uris = _commit_steps(base, tmp_path, range(1, 3))
    assert resolve_resume("latest", base) == uris[1]
    assert resolve_resume(uris[0].rstrip("/"), None) == uris[0]
    local_s3.client().delete_object(Bucket=s3_bucket, Key=_key(CheckpointStore(base), uris[1], "config.json"))
    assert resolve_resume("latest", base) == uris[0]
    with pytest.raises(CheckpointError, match=r"config\.json: missing"):
        resolve_resume(uris[1], base)
