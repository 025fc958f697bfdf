"""``CheckpointStore``: the Airflow-side view of a checkpoint base - list, newest complete, verify.

For ``s3://`` the boto3 client comes from the amazon provider's connection (``aws_default``; ``endpoint_url``
in the extra is honoured), built lazily on first use so constructing a store (in an operator's ``__init__`` or
a trigger) costs nothing. ``file://`` needs no connection.

Finding the newest complete checkpoint walks step folders newest first and stops at the first one that passes
the requested verification, so a run with a thousand checkpoints costs one listing plus a few folders.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from airflow_k8s_ml.checkpoints.backend import Backend, ContentRefused
from airflow_k8s_ml.checkpoints.backends import open_backend
from airflow_k8s_ml.checkpoints.integrity import (
    VerifyMode,
    check_mode,
    content_problem,
    listing_problems,
    stored_checksum_problem,
)
from airflow_k8s_ml.checkpoints.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    Manifest,
    ManifestFile,
    parse_step_folder,
    parse_time,
    too_large,
)
from airflow_k8s_ml.checkpoints.uri import parse_uri
from airflow_k8s_ml.errors import CheckpointError, ValidationError

T = TypeVar("T")
R = TypeVar("R")
_MAX_LISTED_PROBLEMS = 10


@dataclass(frozen=True)
class Checkpoint:
    """One step folder as found in storage. ``complete`` is False with a ``problem`` saying why."""

    uri: str
    step: int
    complete: bool
    metrics: dict[str, float] = field(default_factory=dict)
    created_at: str | None = None
    files: list[ManifestFile] = field(default_factory=list)
    problem: str | None = None
    framework: str | None = None

    def is_newer_than(self, step: int | None = None, time: str | datetime | None = None) -> bool:
        """Whether this checkpoint is past both bounds given (a sensor's "a newer one appeared" test).

        A checkpoint without ``created_at`` is never newer than a time: unknown must not satisfy a wait.
        """
        if step is not None and self.step <= step:
            return False
        if time is not None:
            return self.created_at is not None and parse_time(self.created_at) > parse_time(time)
        return True

    def to_xcom(self) -> dict[str, Any]:
        """What operators push for downstream tasks (deploy, report): small and JSON-native."""
        return {
            "uri": self.uri,
            "step": self.step,
            "metrics": dict(self.metrics),
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class Scan:
    """Result of looking for the newest complete checkpoint.

    ``skipped`` holds the newer step folders that were passed over (incomplete or corrupt), newest first; a
    gate uses it to refuse silently falling back to an older checkpoint.
    """

    latest: Checkpoint | None
    skipped: list[Checkpoint]


def summarize(problems: list[str]) -> str:
    """Join problems for one-line display, capped so 64 missing shards do not flood a task log."""
    shown = problems[:_MAX_LISTED_PROBLEMS]
    more = len(problems) - len(shown)
    return "; ".join(shown) + (f"; ... and {more} more" if more > 0 else "")


def connection_s3_client(aws_conn_id: str | None) -> Any:
    """boto3 S3 client from an Airflow AWS connection (credentials, region, ``endpoint_url`` extra)."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    return S3Hook(aws_conn_id=aws_conn_id).get_conn()


class CheckpointStore:
    """Read side of a checkpoint base URI (``s3://bucket/prefix`` or ``file:///abs/dir``).

    ``s3_client`` bypasses the connection (benchmarks, tools outside Airflow); ``max_workers`` bounds the
    parallel HEAD/GET requests of a verify.
    """

    def __init__(
        self,
        base_uri: str,
        aws_conn_id: str | None = "aws_default",
        *,
        s3_client: Any | None = None,
        max_workers: int = 8,
    ) -> None:
        self.location = parse_uri(base_uri, "base_uri")
        self.base_uri = self.location.uri
        self.aws_conn_id = aws_conn_id
        self.max_workers = max(1, max_workers)
        self._s3_client = s3_client
        self._backend: Backend | None = None

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            client = self._s3_client
            if self.location.scheme == "s3" and client is None:
                client = connection_s3_client(self.aws_conn_id)
            self._backend = open_backend(self.base_uri, client, field="base_uri")
        return self._backend

    @property
    def s3_client(self) -> Any:
        """The boto3 client in use (None for ``file://``); exposed for instrumentation (request counting)."""
        return getattr(self.backend, "client", None)

    # -- public API -----------------------------------------------------------------------------------------
    def list(self) -> builtins.list[Checkpoint]:
        """Every step folder, oldest first, complete or not (manifest + listing check, no checksum requests).

        Named like the spec asks; ``builtins.list`` is spelled out below because this method shadows it.
        """
        return [self._inspect(folder, step)[0] for step, folder in reversed(self._step_folders())]

    def latest_complete(self, verify: str = "checksums") -> Checkpoint | None:
        """The newest checkpoint that passes ``verify`` (``none``, ``checksums`` or ``full``), or None."""
        return self.scan(verify).latest

    def scan(self, verify: str = "checksums") -> Scan:
        """Walk newest first; stop at the first checkpoint that passes ``verify``; report what was skipped."""
        mode = check_mode(verify)
        skipped: list[Checkpoint] = []
        for step, folder in self._step_folders():
            checkpoint, manifest = self._inspect(folder, step)
            if checkpoint.complete and manifest is not None and mode != "none":
                problems = self._deep_problems(folder, manifest.files, mode)
                if problems:
                    checkpoint = replace(checkpoint, complete=False, problem=summarize(problems))
            if checkpoint.complete:
                return Scan(checkpoint, skipped)
            skipped.append(checkpoint)
        return Scan(None, skipped)

    def get(self, uri: str) -> Checkpoint:
        """The checkpoint at ``uri`` (a step folder under this base), checked against its listing only."""
        folder, step = self._folder_of(uri)
        return self._inspect(folder, step)[0]

    def verify(self, uri: str, mode: str = "checksums") -> builtins.list[str]:
        """Problems with the checkpoint at ``uri``; empty when intact.

        ``checksums`` (default) compares each manifest sha256 and size with what S3 stored, downloading zero
        bytes of data (only ``MANIFEST.json`` is read); ``full`` streams and hashes every file.
        """
        checked = check_mode(mode, "mode")
        folder, step = self._folder_of(uri)
        objects = self._list_objects(folder)
        if isinstance(objects, str):
            return [objects]
        manifest, problems = self._read_manifest(folder, step, objects)
        if manifest is None or checked == "none":
            return problems
        listed_ok = [f for f in manifest.files if objects.get(f.storage_key) == f.size]
        return problems + self._deep_problems(folder, listed_ok, checked)

    def checkpoint_uri(self, folder: str) -> str:
        return f"{self.base_uri}/{folder}/"

    # -- internals ------------------------------------------------------------------------------------------
    def _step_folders(self) -> builtins.list[tuple[int, str]]:
        """(step, folder) for every step folder, newest first; ties (``step-7`` vs ``step-007``) by name."""
        found = [
            (step, name)
            for name in self.backend.list_folders()
            if (step := parse_step_folder(name)) is not None
        ]
        return sorted(found, reverse=True)

    def _folder_of(self, uri: str) -> tuple[str, int]:
        location = parse_uri(uri, "uri")
        step = parse_step_folder(location.name)
        if location.parent().uri != self.base_uri or step is None:
            raise ValidationError("uri", f"{uri!r} is not a step-<N> folder directly under {self.base_uri}")
        return location.name, step

    def _list_objects(self, folder: str) -> dict[str, int] | str:
        """The folder's objects with their sizes, or why the folder is refused (a symbolic link in it)."""
        try:
            return self.backend.list_objects(folder)
        except ContentRefused as exc:
            return str(exc)

    def _read_manifest(
        self, folder: str, step: int, objects: dict[str, int]
    ) -> tuple[Manifest | None, builtins.list[str]]:
        if MANIFEST_NAME not in objects:
            return None, [f"no {MANIFEST_NAME} ({len(objects)} objects; upload unfinished or abandoned)"]
        if objects[MANIFEST_NAME] > MAX_MANIFEST_BYTES:  # refused before a byte of it is read
            return None, [too_large(objects[MANIFEST_NAME])]
        raw = self.backend.read(folder, MANIFEST_NAME)
        if raw is None:
            return None, [f"{MANIFEST_NAME} vanished while reading"]
        try:
            manifest = Manifest.from_json(raw)
        except CheckpointError as exc:
            return None, [str(exc)]
        return manifest, listing_problems(manifest, step, objects)

    def _inspect(self, folder: str, step: int) -> tuple[Checkpoint, Manifest | None]:
        uri = self.checkpoint_uri(folder)
        objects = self._list_objects(folder)
        if isinstance(objects, str):
            return Checkpoint(uri=uri, step=step, complete=False, problem=objects), None
        manifest, problems = self._read_manifest(folder, step, objects)
        if manifest is None:
            return Checkpoint(uri=uri, step=step, complete=False, problem=summarize(problems)), None
        checkpoint = Checkpoint(
            uri=uri,
            step=step,
            complete=not problems,
            metrics=dict(manifest.metrics),
            created_at=manifest.created_at or None,
            files=list(manifest.files),
            problem=summarize(problems) if problems else None,
            framework=manifest.framework,
        )
        return checkpoint, manifest

    def _deep_problems(
        self, folder: str, entries: Iterable[ManifestFile], mode: VerifyMode
    ) -> builtins.list[str]:
        backend = self.backend
        if mode == "checksums" and backend.stores_checksums:

            def check(entry: ManifestFile) -> str | None:
                size, stored = backend.stored_checksum(folder, entry.storage_key)
                return stored_checksum_problem(entry, size, stored)

        else:  # "full", or a filesystem that records no checksums: hash the bytes

            def check(entry: ManifestFile) -> str | None:
                try:
                    size, sha = backend.hash_object(folder, entry.storage_key)
                except ContentRefused as exc:
                    return f"{entry.path}: {exc}"
                return content_problem(entry, size, sha)

        return [p for p in self._parallel(check, entries) if p]

    def _parallel(self, fn: Callable[[T], R], items: Iterable[T]) -> builtins.list[R]:
        work = list(items)
        if len(work) <= 1 or self.max_workers == 1:
            return [fn(item) for item in work]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(work))) as pool:
            return list(pool.map(fn, work))
