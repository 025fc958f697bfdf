"""URI parsing and the file:// half of the batch-file I/O (the s3:// half is an integration test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads import io


def test_parse_uri() -> None:
    assert io.parse_uri("s3://bucket/a/b.csv") == io.Location("s3", "bucket", "a/b.csv")
    assert io.parse_uri("file:///tmp/x%20y/b.csv") == io.Location("file", "", "/tmp/x y/b.csv")
    assert io.parse_uri("/tmp/b.csv") == io.Location("file", "", "/tmp/b.csv")
    assert io.parse_uri("s3://bucket/a/b.csv").name == "b.csv"
    for bad in ("s3:///nobucket", "file://host/x", "http://x/y", "relative/path"):
        with pytest.raises(ValidationError) as info:
            io.parse_uri(bad, "input_uri")
        assert info.value.field == "input_uri"


def test_join_uri() -> None:
    assert io.join_uri("s3://b/out", "x.json") == "s3://b/out/x.json"
    assert io.join_uri("s3://b/out/", "/x.json") == "s3://b/out/x.json"


def test_file_roundtrip_and_listing(tmp_path: Path) -> None:
    prefix = f"file://{tmp_path}/in"
    assert io.list_files(prefix) == []  # a missing folder is just empty
    io.write_bytes(io.join_uri(prefix, "b.csv"), b"2")
    io.write_bytes(io.join_uri(prefix, "a.csv"), b"1")
    io.write_bytes(io.join_uri(prefix, "_SUMMARY.json"), b"{}")
    (tmp_path / "in" / "sub").mkdir()
    (tmp_path / "in" / ".hidden").write_bytes(b"")
    assert io.list_files(prefix) == [f"{prefix}/a.csv", f"{prefix}/b.csv"]
    assert io.read_bytes(f"{prefix}/b.csv") == b"2"
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == [
        ".hidden",
        "_SUMMARY.json",
        "a.csv",
        "b.csv",
        "sub",
    ]
