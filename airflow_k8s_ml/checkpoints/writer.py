"""``CheckpointWriter``: what training code calls to commit a checkpoint. boto3 only, no Airflow import.

Runs inside pods with credentials and endpoint from the environment (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ...), so the same training script works against AWS, MinIO and the embedded endpoint.
The commit is all-or-nothing: files are staged first, ``MANIFEST.json`` is published last and atomically, and
a writer that loses a race on the same step gets :class:`~airflow_k8s_ml.errors.CheckpointError`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_k8s_ml.checkpoints.backend import Backend, Source
from airflow_k8s_ml.checkpoints.backends import open_backend
from airflow_k8s_ml.checkpoints.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    Manifest,
    ManifestFile,
    check_relative_path,
    clean_metrics,
    step_folder,
    too_large,
    utc_now_iso,
)
from airflow_k8s_ml.errors import CheckpointError, ValidationError

FileSource = str | os.PathLike[str] | bytes


class CheckpointWriter:
    """Commit checkpoints under ``base_uri`` (``s3://bucket/prefix`` or ``file:///abs/dir``).

    ``s3_client`` replaces the environment-built boto3 client (useful for custom sessions); ``max_workers``
    bounds parallel uploads of a many-shard checkpoint.
    """

    def __init__(self, base_uri: str, *, s3_client: Any | None = None, max_workers: int = 8) -> None:
        self.base_uri = base_uri.rstrip("/")
        self.max_workers = max(1, max_workers)
        self._backend: Backend = open_backend(base_uri, s3_client, field="base_uri")

    @property
    def backend(self) -> Backend:
        return self._backend

    def commit(
        self,
        step: int,
        files: Mapping[str, FileSource],
        metrics: Mapping[str, Any] | None = None,
        framework: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Upload ``files`` (checkpoint-relative path -> local file, directory or bytes) as step ``step``.

        Returns the checkpoint URI (``<base>/step-<N>/``). Raises CheckpointError if the step is already
        committed (checked before uploading anything, and again atomically at the end), ValidationError for
        bad paths or non-finite metrics (before any upload).
        """
        folder = step_folder(step)
        sources = expand_sources(files)
        clean = clean_metrics(metrics)
        if self._backend.has_manifest(folder):
            raise CheckpointError(f"{self.base_uri}/{folder}/ is already committed; refusing to overwrite it")
        commit_id = uuid.uuid4().hex[:16]
        try:
            entries = self._stage(folder, commit_id, sources)
            manifest = Manifest(
                step=step,
                files=tuple(entries),
                metrics=clean,
                created_at=utc_now_iso(),
                framework=framework,
                commit_id=commit_id,
                extra=dict(extra or {}),
            )
            body = manifest.to_json()
            if len(body) > MAX_MANIFEST_BYTES:  # no reader would accept it: refuse it here, not at the gate
                raise ValidationError("extra", too_large(len(body)))
            self._backend.publish(folder, commit_id, body)
        except BaseException:
            self._backend.discard(folder, commit_id)
            raise
        return f"{self.base_uri}/{folder}/"

    def _stage(self, folder: str, commit_id: str, sources: list[tuple[str, Source]]) -> list[ManifestFile]:
        prefix = self._backend.staging_prefix(commit_id)

        def one(item: tuple[str, Source]) -> ManifestFile:
            path, source = item
            size, sha, s3_checksum = self._backend.put(folder, commit_id, path, source)
            return ManifestFile(path, size, sha, key=prefix + path if prefix else "", s3_checksum=s3_checksum)

        if len(sources) <= 1 or self.max_workers == 1:
            return [one(item) for item in sources]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(sources))) as pool:
            return list(pool.map(one, sources))


def expand_sources(files: Mapping[str, FileSource]) -> list[tuple[str, Source]]:
    """Flatten ``files`` into (relative path, path-or-bytes), walking directories, validating every path.

    A directory maps to every file below it; the key ``"."`` puts a directory's files at the checkpoint root
    (handy for ``save_pretrained`` output).

    Done before any upload so a typo fails the commit while nothing has been written.
    """
    if not files:
        raise ValidationError("files", "a checkpoint needs at least one file")
    out: list[tuple[str, Source]] = []
    for name, source in files.items():
        field = f"files[{name!r}]"
        local = None if isinstance(source, bytes | bytearray | memoryview) else os.fspath(source)
        if local is not None and os.path.isdir(local):
            root = "" if name in ("", ".", "/") else check_relative_path(name.strip("/"), field) + "/"
            for dirpath, _dirs, names in sorted(os.walk(local)):
                for leaf in sorted(names):
                    full = os.path.join(dirpath, leaf)
                    out.append((root + os.path.relpath(full, local).replace(os.sep, "/"), full))
            continue
        rel = check_relative_path(name.strip("/") if isinstance(name, str) else name, field)
        if local is None:
            out.append((rel, bytes(source)))  # type: ignore[arg-type]
        elif os.path.isfile(local):
            out.append((rel, local))
        else:
            raise ValidationError(f"files[{name!r}]", f"no such file or directory: {local}")
    paths = [p for p, _ in out]
    if MANIFEST_NAME in paths:
        raise ValidationError("files", f"{MANIFEST_NAME} is reserved for the checkpoint manifest")
    if len(set(paths)) != len(paths):
        raise ValidationError("files", "two entries map to the same checkpoint path")
    return out
