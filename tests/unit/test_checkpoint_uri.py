"""Checkpoint locations: one grammar for s3:// and file://, mistakes rejected with the argument named."""

from __future__ import annotations

import pytest

from airflow_k8s_ml.checkpoints.uri import Location, parse_uri
from airflow_k8s_ml.errors import ValidationError


def test_s3_uris() -> None:
    loc = parse_uri("s3://bucket/models/run1/")
    assert loc == Location("s3", "bucket", "models/run1")
    assert loc.uri == "s3://bucket/models/run1"
    assert loc.child("step-3").uri == "s3://bucket/models/run1/step-3"
    assert parse_uri("s3://bucket/models/run1/step-3/").parent() == loc
    assert parse_uri("s3://bucket").uri == "s3://bucket"
    assert parse_uri("s3://bucket/step-1").parent().uri == "s3://bucket"


def test_file_uris_and_bare_absolute_paths() -> None:
    assert parse_uri("file:///data/run1/").path == "/data/run1"
    assert parse_uri("/data/run1").uri == "file:///data/run1"
    assert parse_uri("file:///data/run1/step-2/").name == "step-2"


@pytest.mark.parametrize(
    "bad", ["", "relative/dir", "s3://", "s3://b/a//c", "s3://b/../x", "gs://b/x", "file://host/x", "/a/../b"]
)
def test_rejected(bad: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_uri(bad, "base_uri")
    assert info.value.field == "base_uri"
