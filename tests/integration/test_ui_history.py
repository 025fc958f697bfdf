"""The Training tab's checkpoint reader against real storage: file:// and the embedded S3 over real HTTP.

Checkpoints are committed by the real writer (as the training workload does); an unfinished commit is left
the way a killed writer leaves it (data without ``MANIFEST.json``). Requests are counted at the boto3 client
with botocore's event hooks, so "one listing plus the new manifests" is observed, not assumed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.checkpoints import CheckpointWriter
from airflow_k8s_ml.testbed.local_s3 import LocalS3
from airflow_k8s_ml.ui.history import HistoryReader


def _metrics(step: int) -> dict[str, float]:
    return {"train_loss": 2.0 / step, "val_loss": 2.2 / step, "val_accuracy": 1 - 0.5 / step, "epoch": step}


def _commit(writer: CheckpointWriter, steps: range) -> None:
    for step in steps:
        writer.commit(step, {"model.bin": b"w" * (100 + step), "history.jsonl": b"{}\n"}, _metrics(step))


class Requests:
    """The S3 operations a client sends."""

    def __init__(self, client: Any) -> None:
        self.ops: Counter[str] = Counter()
        client.meta.events.register("before-parameter-build.s3", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.ops[model.name] += 1

    def take(self) -> Counter[str]:
        seen, self.ops = self.ops, Counter()
        return seen


def test_file_history_has_every_committed_step_and_ignores_an_unfinished_one(tmp_path: Path) -> None:
    base = tmp_path / "run"
    _commit(CheckpointWriter(f"file://{base}"), range(1, 6))
    (base / "step-6").mkdir()
    (base / "step-6" / "model.bin").write_bytes(b"half")  # a commit that never published its manifest
    reader = HistoryReader()
    history = reader.read(f"file://{base}")
    assert [p.step for p in history.complete] == [1, 2, 3, 4, 5]
    assert history.latest is not None and history.latest.step == 5
    assert history.latest.metrics == _metrics(5)
    assert history.latest.uri == f"file://{base}/step-5/"
    (pending,) = history.newer_incomplete
    assert pending.step == 6 and "no MANIFEST.json" in (pending.problem or "")
    assert history.manifests_fetched == 5
    again = reader.read(f"file://{base}")
    assert again.manifests_fetched == 0 and again.points == history.points
    reader.close()


def test_a_missing_base_is_an_empty_history(tmp_path: Path) -> None:
    history = HistoryReader().read(f"file://{tmp_path}/never-written")
    assert history.points == () and history.latest is None


def test_s3_history_is_one_listing_plus_only_the_new_manifests(local_s3: LocalS3, s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/checkpoints/nightly/run1"
    writer = CheckpointWriter(base)
    _commit(writer, range(1, 9))
    client = local_s3.client()
    client.put_object(Bucket=s3_bucket, Key="checkpoints/nightly/run1/step-9/data-abc/model.bin", Body=b"x")
    requests = Requests(client)
    reader = HistoryReader(max_workers=4, s3_client=lambda conn_id: client)

    history = reader.read(base)
    assert [p.step for p in history.complete] == list(range(1, 9))
    assert [p.step for p in history.newer_incomplete] == [9]
    assert history.latest is not None and history.latest.metrics["val_accuracy"] == pytest.approx(1 - 0.5 / 8)
    assert requests.take() == Counter({"ListObjectsV2": 1, "GetObject": 8})

    assert reader.read(base).points == history.points
    assert requests.take() == Counter({"ListObjectsV2": 1})  # every manifest served from the ETag cache

    _commit(writer, range(9, 10))  # step 9 completes (the unfinished data stays, unlisted in its manifest)
    grown = reader.read(base)
    assert [p.step for p in grown.complete] == list(range(1, 10)) and grown.newer_incomplete == ()
    assert requests.take() == Counter({"ListObjectsV2": 1, "GetObject": 1})
    reader.close()


def test_s3_corrupt_checkpoint_is_shown_with_its_problem(local_s3: LocalS3, s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/run2"
    writer = CheckpointWriter(base)
    _commit(writer, range(1, 4))
    client = local_s3.client()
    listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="run2/step-3/")["Contents"]
    (model,) = [o["Key"] for o in listed if o["Key"].endswith("model.bin")]
    client.delete_object(Bucket=s3_bucket, Key=model)
    history = HistoryReader(s3_client=lambda conn_id: client).read(base)
    assert [p.step for p in history.complete] == [1, 2]
    (broken,) = history.newer_incomplete
    assert broken.step == 3 and "model.bin: missing" in (broken.problem or "")


def test_s3_history_reads_through_the_airflow_connection(local_s3: LocalS3, s3_bucket: str) -> None:
    """No client given: the reader builds one from ``aws_default`` (the env connection), like the gate."""
    base = f"s3://{s3_bucket}/run3"
    _commit(CheckpointWriter(base), range(1, 3))
    history = HistoryReader().read(base, "aws_default")
    assert [p.step for p in history.complete] == [1, 2]
