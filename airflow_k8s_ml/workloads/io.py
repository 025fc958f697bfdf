"""Read, write and list small objects under ``s3://`` or ``file://`` prefixes (batch inputs and outputs).

Checkpoints have their own, stricter I/O in :mod:`airflow_k8s_ml.checkpoints`; this module only moves the
batch-inference files. boto3 is configured purely from the environment (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``), which is what a pod gets from its
Secret, and is imported lazily so the pure helpers stay cheap. A bare absolute path is accepted as a local
path for convenience on a laptop.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from airflow_k8s_ml.errors import ValidationError


@dataclass(frozen=True)
class Location:
    """A parsed URI: ``scheme`` is ``s3`` or ``file``; ``bucket`` is empty for files; ``key`` is the path."""

    scheme: str
    bucket: str
    key: str

    @property
    def name(self) -> str:
        """The last path segment (the file name)."""
        return self.key.rstrip("/").rsplit("/", 1)[-1]


def parse_uri(uri: str, field: str = "uri") -> Location:
    """Parse ``s3://bucket/key``, ``file:///abs/path`` or ``/abs/path``; anything else: ValidationError."""
    if uri.startswith("/"):
        return Location("file", "", uri)
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValidationError(field, f"s3 URI without a bucket: {uri!r}")
        return Location("s3", parsed.netloc, parsed.path.lstrip("/"))
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ValidationError(field, f"file URI must be file:///absolute/path: {uri!r}")
        return Location("file", "", unquote(parsed.path))
    raise ValidationError(field, f"unsupported URI (use s3://bucket/prefix or file:///abs/path): {uri!r}")


def join_uri(prefix: str, name: str) -> str:
    """``prefix`` treated as a folder, plus ``name``: ``join_uri("s3://b/out", "x.json") == "s3://b/out/x.json"``."""
    return prefix.rstrip("/") + "/" + name.lstrip("/")


def s3_client() -> Any:
    """A boto3 S3 client configured from the environment (endpoint included, for MinIO or the embedded S3)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
        region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    )


def list_files(prefix: str, field: str = "uri") -> list[str]:
    """URIs of the files directly under ``prefix`` (a folder), sorted by name.

    Names starting with ``_`` or ``.`` are markers or temp files (``_SUMMARY.json``, ``.x.part``): skipped.
    """
    loc = parse_uri(prefix, field)
    if loc.scheme == "file":
        folder = Path(loc.key)
        if not folder.is_dir():
            return []
        names = [p.name for p in folder.iterdir() if p.is_file()]
    else:
        key_prefix = loc.key.rstrip("/") + "/" if loc.key.strip("/") else ""
        names = []
        paginator = s3_client().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=loc.bucket, Prefix=key_prefix, Delimiter="/"):
            names.extend(obj["Key"][len(key_prefix) :] for obj in page.get("Contents", []))
    return [join_uri(prefix, n) for n in sorted(names) if n and not n.startswith(("_", "."))]


def read_bytes(uri: str, field: str = "uri") -> bytes:
    """The whole content of one file or object."""
    loc = parse_uri(uri, field)
    if loc.scheme == "file":
        return Path(loc.key).read_bytes()
    response = s3_client().get_object(Bucket=loc.bucket, Key=loc.key)
    body: bytes = response["Body"].read()
    return body


def write_bytes(
    uri: str, data: bytes, content_type: str = "application/octet-stream", field: str = "uri"
) -> None:
    """Write one file or object. Local writes go via a temp file + rename: readers never see half a file."""
    loc = parse_uri(uri, field)
    if loc.scheme == "file":
        path = Path(loc.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".part", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return
    s3_client().put_object(Bucket=loc.bucket, Key=loc.key, Body=data, ContentType=content_type)
