"""S3 storage for checkpoints (AWS S3, MinIO, the embedded endpoint): boto3 only, no Airflow.

Why the shapes here:

* every object is uploaded with an explicit SHA-256 checksum (``ChecksumSHA256``), so S3 rejects bytes
  damaged in transit and can later report the checksum through ``HeadObject(ChecksumMode=ENABLED)`` - that is
  what makes verify-without-download possible;
* files larger than ``multipart_threshold`` go up in parts; S3 then stores a *composite* checksum
  (sha256 of the part digests), which we compute as we go and record in the manifest;
* a commit's files go under ``step-N/data-<commit_id>/`` so writers racing on one step never overwrite each
  other's bytes; only the ``MANIFEST.json`` conditional write decides the winner, and losers delete their own
  data.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow_k8s_ml.checkpoints.backend import ContentRefused, Source
from airflow_k8s_ml.checkpoints.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    composite_sha256,
    hex_to_b64,
    sha256_file,
    sha256_stream,
)
from airflow_k8s_ml.checkpoints.uri import Location
from airflow_k8s_ml.errors import CheckpointError

MiB = 1024 * 1024
_LOST_RACE_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}


def env_s3_client() -> Any:
    """A boto3 S3 client configured only by the environment (what pods get through ``env_from``).

    boto3 reads ``AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL_S3`` itself, so the same code reaches AWS, MinIO or
    the embedded endpoint. A private session keeps client creation thread-safe.
    """
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=32)
    return boto3.session.Session().client("s3", config=config)


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


@contextmanager
def _content_checked(uri: str) -> Iterator[None]:
    """botocore validates a streamed body against the checksum S3 stored (``FlexibleChecksumError``):
    a mismatch is corruption at rest, reported as :class:`ContentRefused`."""
    try:
        yield
    except Exception as exc:
        from botocore.exceptions import FlexibleChecksumError

        if not isinstance(exc, FlexibleChecksumError):
            raise
        message = f"S3 refused the bytes of {uri} as not matching its stored checksum: {exc}"
        raise ContentRefused(message) from exc


class S3Backend:
    """Checkpoint storage under ``s3://bucket/prefix`` through a ready boto3 client."""

    stores_checksums = True

    def __init__(
        self,
        location: Location,
        client: Any,
        multipart_threshold: int = 256 * MiB,
        part_size: int = 64 * MiB,
    ) -> None:
        self.location = location
        self.client = client
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size

    # -- naming ---------------------------------------------------------------------------------------------
    def _key(self, folder: str, key: str = "") -> str:
        parts = [p for p in (self.location.prefix, folder, key) if p]
        return "/".join(parts)

    def _uri(self, folder: str, key: str = "") -> str:
        return f"s3://{self.location.bucket}/{self._key(folder, key)}"

    def staging_prefix(self, commit_id: str) -> str:
        return f"data-{commit_id}/"

    # -- reading --------------------------------------------------------------------------------------------
    def list_folders(self) -> list[str]:
        base = self._key("") + "/" if self.location.prefix else ""
        names: list[str] = []
        for page in self._pages(Prefix=base, Delimiter="/"):
            names += [cp["Prefix"][len(base) :].rstrip("/") for cp in page.get("CommonPrefixes", [])]
        return names

    def list_objects(self, folder: str) -> dict[str, int]:
        base = self._key(folder) + "/"
        return {
            obj["Key"][len(base) :]: int(obj["Size"])
            for page in self._pages(Prefix=base)
            for obj in page.get("Contents", [])
        }

    def _pages(self, **kwargs: Any) -> Any:
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            yield from paginator.paginate(Bucket=self.location.bucket, **kwargs)
        except Exception as exc:
            raise CheckpointError(f"listing {self.location.uri} failed: {exc}") from exc

    def read(self, folder: str, key: str) -> bytes | None:
        body = self._get(folder, key)
        return None if body is None else body.read(MAX_MANIFEST_BYTES + 1)  # only manifests are read whole

    def _get(self, folder: str, key: str) -> Any:
        try:
            return self.client.get_object(Bucket=self.location.bucket, Key=self._key(folder, key))["Body"]
        except Exception as exc:
            if _error_code(exc) in _MISSING_CODES:
                return None
            raise CheckpointError(f"reading {self._uri(folder, key)} failed: {exc}") from exc

    def stored_checksum(self, folder: str, key: str) -> tuple[int | None, str | None]:
        try:
            head = self.client.head_object(
                Bucket=self.location.bucket, Key=self._key(folder, key), ChecksumMode="ENABLED"
            )
        except Exception as exc:
            if _error_code(exc) in _MISSING_CODES:
                return None, None
            raise CheckpointError(f"HeadObject {self._uri(folder, key)} failed: {exc}") from exc
        return int(head["ContentLength"]), head.get("ChecksumSHA256")

    def hash_object(self, folder: str, key: str) -> tuple[int | None, str | None]:
        body = self._get(folder, key)
        if body is None:
            return None, None
        with body, _content_checked(self._uri(folder, key)):
            return sha256_stream(body)

    def download(self, folder: str, key: str, dest: str) -> tuple[int, str]:
        body = self._get(folder, key)
        if body is None:
            raise CheckpointError(f"{self._uri(folder, key)} is missing")
        digest, size = hashlib.sha256(), 0
        with body, open(dest, "wb") as out, _content_checked(self._uri(folder, key)):
            for block in body.iter_chunks(MiB):
                digest.update(block)
                size += len(block)
                out.write(block)
        return size, digest.hexdigest()

    def has_manifest(self, folder: str) -> bool:
        return self.stored_checksum(folder, MANIFEST_NAME)[0] is not None

    # -- writing --------------------------------------------------------------------------------------------
    def put(self, folder: str, commit_id: str, key: str, source: Source) -> tuple[int, str, str | None]:
        object_key = self._key(folder, self.staging_prefix(commit_id) + key)
        try:
            if isinstance(source, bytes):
                sha = hashlib.sha256(source).hexdigest()
                self._put_single(object_key, source, len(source), sha)
                return len(source), sha, None
            if os.path.getsize(source) > self.multipart_threshold:
                return self._put_multipart(object_key, source)
            size, sha = sha256_file(source)
            with open(source, "rb") as fh:
                self._put_single(object_key, fh, size, sha)
            return size, sha, None
        except CheckpointError:
            raise
        except Exception as exc:
            raise CheckpointError(f"uploading {key!r} to {self._uri(folder)} failed: {exc}") from exc

    def _put_single(self, object_key: str, body: Any, size: int, sha_hex: str, **extra: Any) -> None:
        self.client.put_object(
            Bucket=self.location.bucket,
            Key=object_key,
            Body=body,
            ContentLength=size,
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=hex_to_b64(sha_hex),
            **extra,
        )

    def _put_multipart(self, object_key: str, path: str) -> tuple[int, str, str | None]:
        bucket = self.location.bucket
        upload_id = self.client.create_multipart_upload(
            Bucket=bucket, Key=object_key, ChecksumAlgorithm="SHA256"
        )["UploadId"]
        whole, size, digests, parts = hashlib.sha256(), 0, [], []
        try:
            with open(path, "rb") as fh:
                while chunk := fh.read(self.part_size):
                    part_digest = hashlib.sha256(chunk).digest()
                    whole.update(chunk)
                    size += len(chunk)
                    digests.append(part_digest)
                    checksum = hex_to_b64(part_digest.hex())
                    response = self.client.upload_part(
                        Bucket=bucket,
                        Key=object_key,
                        UploadId=upload_id,
                        PartNumber=len(digests),
                        Body=chunk,
                        ChecksumAlgorithm="SHA256",
                        ChecksumSHA256=checksum,
                    )
                    parts.append(
                        {"PartNumber": len(digests), "ETag": response["ETag"], "ChecksumSHA256": checksum}
                    )
            self.client.complete_multipart_upload(
                Bucket=bucket, Key=object_key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except BaseException:
            self.client.abort_multipart_upload(Bucket=bucket, Key=object_key, UploadId=upload_id)
            raise
        return size, whole.hexdigest(), composite_sha256(digests)

    def publish(self, folder: str, commit_id: str, manifest: bytes) -> None:
        sha = hashlib.sha256(manifest).hexdigest()
        try:
            self._put_single(
                self._key(folder, MANIFEST_NAME),
                manifest,
                len(manifest),
                sha,
                IfNoneMatch="*",
                ContentType="application/json",
            )
        except Exception as exc:
            if _error_code(exc) in _LOST_RACE_CODES:
                raise CheckpointError(
                    f"{self._uri(folder)} was committed by another writer first (MANIFEST.json exists); "
                    "this writer's commit is discarded"
                ) from exc
            raise CheckpointError(f"writing {self._uri(folder, MANIFEST_NAME)} failed: {exc}") from exc

    def discard(self, folder: str, commit_id: str) -> None:
        try:
            staged = [
                posixpath.join(self._key(folder), key)
                for key in self.list_objects(folder)
                if key.startswith(self.staging_prefix(commit_id))
            ]
            for start in range(0, len(staged), 1000):
                batch = [{"Key": key} for key in staged[start : start + 1000]]
                self.client.delete_objects(
                    Bucket=self.location.bucket, Delete={"Objects": batch, "Quiet": True}
                )
        except Exception:  # best effort: staged data without a manifest naming it is ignored by readers
            return
