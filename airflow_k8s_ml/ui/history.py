"""The checkpoints a run has committed, as the Training tab draws them: one listing, then the manifests.

Why not :class:`~airflow_k8s_ml.checkpoints.store.CheckpointStore`: its ``list()`` lists every step folder
separately (one request per folder) and re-reads every manifest on every call. The tab is reloaded while a
run trains, so here the whole base is listed once (S3 ``ListObjectsV2`` without a delimiter, paginated),
the ``MANIFEST.json`` objects are fetched in parallel, and a parsed manifest is cached by its ETag (S3) or
its size and mtime (file://): a reload of a run with 100 checkpoints costs one listing plus the manifests
committed since the last look. Manifests are written once (conditional put), so the cache never goes stale.

Completeness is the store's ``verify="none"`` rule, applied to the same listing: the manifest parses,
names its folder's step, and every file it lists is there with its size
(:func:`~airflow_k8s_ml.checkpoints.integrity.listing_problems`). The gate's checksum verification is not
repeated: the tab shows progress, the gate decides.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.checkpoints.integrity import listing_problems
from airflow_k8s_ml.checkpoints.manifest import MANIFEST_NAME, Manifest, parse_step_folder
from airflow_k8s_ml.checkpoints.uri import Location, parse_uri
from airflow_k8s_ml.errors import CheckpointError

__all__ = ["History", "HistoryReader", "Point"]

#: key relative to a step folder -> (size, version: the ETag on S3, mtime_ns on a filesystem)
Listing = dict[str, tuple[int, str]]


@dataclass(frozen=True)
class Point:
    """One step folder: complete (with its metrics) or not (with the reason)."""

    step: int
    uri: str
    complete: bool
    metrics: dict[str, float] = field(default_factory=dict)
    created_at: str | None = None
    problem: str | None = None


@dataclass(frozen=True)
class History:
    """Every step folder under a base, oldest first, and how it was read (for the bench and the page)."""

    base_uri: str
    points: tuple[Point, ...]
    manifests_fetched: int = 0
    seconds: float = 0.0

    @property
    def complete(self) -> tuple[Point, ...]:
        return tuple(p for p in self.points if p.complete)

    @property
    def latest(self) -> Point | None:
        """The newest complete checkpoint (what ``resume_from="latest"`` and the gate would pick)."""
        done = self.complete
        return done[-1] if done else None

    @property
    def newer_incomplete(self) -> tuple[Point, ...]:
        """Step folders newer than the newest complete one that are not (yet) checkpoints."""
        latest = self.latest
        return tuple(p for p in self.points if not p.complete and (latest is None or p.step > latest.step))


class HistoryReader:
    """Reads :class:`History` for ``s3://`` and ``file://`` bases; thread-safe, one per api-server process.

    ``s3_client`` maps an ``aws_conn_id`` to a boto3 client (the checkpoint gate's
    :func:`~airflow_k8s_ml.checkpoints.store.connection_s3_client` by default); clients are kept for
    ``client_ttl`` seconds, since building one costs more than the whole listing.
    """

    def __init__(
        self,
        *,
        max_workers: int = 10,
        cache_size: int = 4096,
        s3_client: Callable[[str | None], Any] | None = None,
        client_ttl: float = 300.0,
    ) -> None:
        self.max_workers = max(1, max_workers)
        self.cache_size = cache_size
        self._make_client = s3_client or _connection_client
        self.client_ttl = client_ttl
        self._clients: dict[str | None, tuple[float, Any]] = {}
        self._manifests: OrderedDict[tuple[str, str], Manifest | str] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="ckpt-manifest")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def read(self, base_uri: str, aws_conn_id: str | None = "aws_default") -> History:
        """Every step folder under ``base_uri`` with its manifest's metrics; CheckpointError if unreadable."""
        started = time.perf_counter()
        location = parse_uri(base_uri, "checkpoint_uri")
        if location.scheme == "s3":
            source: _Source = _S3Source(location, self._client(aws_conn_id))
        else:
            source = _FileSource(location)
        folders = source.tree()
        wanted = [
            (folder, objects[MANIFEST_NAME][1])
            for folder, objects in folders.items()
            if MANIFEST_NAME in objects
        ]
        missing = [item for item in wanted if self._cached(source.id(item[0]), item[1]) is None]
        fetched: dict[str, Manifest | str] = {}
        for (folder, version), parsed in zip(missing, self._fetch(source, missing), strict=True):
            fetched[folder] = parsed
            if not isinstance(parsed, _Unreadable):  # a transport error is retried on the next read
                self._remember((source.id(folder), version), parsed)
        points = []
        for folder, objects in folders.items():
            step = parse_step_folder(folder)
            if step is None:
                continue
            manifest = fetched.get(folder) or self._cached(
                source.id(folder), objects.get(MANIFEST_NAME, (0, ""))[1]
            )
            points.append(_point(f"{location.uri}/{folder}/", step, objects, manifest))
        points.sort(key=lambda p: (p.step, p.uri))
        return History(location.uri, tuple(points), len(missing), time.perf_counter() - started)

    # -- internals ------------------------------------------------------------------------------------------
    def _client(self, aws_conn_id: str | None) -> Any:
        now = time.monotonic()
        with self._lock:
            cached = self._clients.get(aws_conn_id)
            if cached is not None and now - cached[0] < self.client_ttl:
                return cached[1]
        client = self._make_client(aws_conn_id)
        with self._lock:
            self._clients[aws_conn_id] = (now, client)
        return client

    def _fetch(self, source: _Source, items: list[tuple[str, str]]) -> Iterable[Manifest | str]:
        if len(items) <= 1:
            return [source.manifest(folder) for folder, _ in items]
        return self._pool.map(lambda item: source.manifest(item[0]), items)

    def _cached(self, folder_id: str, version: str) -> Manifest | str | None:
        if not version:
            return None
        with self._lock:
            value = self._manifests.get((folder_id, version))
            if value is not None:
                self._manifests.move_to_end((folder_id, version))
            return value

    def _remember(self, key: tuple[str, str], value: Manifest | str) -> None:
        with self._lock:
            self._manifests[key] = value
            while len(self._manifests) > self.cache_size:
                self._manifests.popitem(last=False)


def _point(uri: str, step: int, objects: Listing, manifest: Manifest | str | None) -> Point:
    if manifest is None:
        count = len(objects)
        return Point(step, uri, False, problem=f"no {MANIFEST_NAME} yet ({count} objects): not committed")
    if isinstance(manifest, str):
        return Point(step, uri, False, problem=manifest)
    problems = listing_problems(manifest, step, {key: size for key, (size, _) in objects.items()})
    return Point(
        step,
        uri,
        not problems,
        metrics=dict(manifest.metrics),
        created_at=manifest.created_at or None,
        problem="; ".join(problems[:3]) if problems else None,
    )


def _connection_client(aws_conn_id: str | None) -> Any:
    from airflow_k8s_ml.checkpoints.store import connection_s3_client

    return connection_s3_client(aws_conn_id)


class _Unreadable(str):
    """A manifest that could not be read (a transport error, not a bad manifest): shown, never cached."""


class _Source:
    """One storage kind: the tree under the base, and one manifest (parsed, or the reason it is not)."""

    def id(self, folder: str) -> str:
        raise NotImplementedError

    def tree(self) -> dict[str, Listing]:
        raise NotImplementedError

    def manifest(self, folder: str) -> Manifest | str:
        raise NotImplementedError


def _parse(raw: bytes | None) -> Manifest | str:
    if raw is None:
        return f"{MANIFEST_NAME} vanished while reading"
    try:
        return Manifest.from_json(raw)
    except CheckpointError as exc:
        return str(exc)


class _S3Source(_Source):
    def __init__(self, location: Location, client: Any) -> None:
        self.location = location
        self.client = client
        self.base = f"{location.prefix}/" if location.prefix else ""

    def id(self, folder: str) -> str:
        return f"s3://{self.location.bucket}/{self.base}{folder}"

    def tree(self) -> dict[str, Listing]:
        folders: dict[str, Listing] = {}
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.location.bucket, Prefix=self.base):
                for obj in page.get("Contents", []):
                    folder, _, key = obj["Key"][len(self.base) :].partition("/")
                    if key and parse_step_folder(folder) is not None:
                        folders.setdefault(folder, {})[key] = (int(obj["Size"]), str(obj.get("ETag", "")))
        except Exception as exc:
            raise CheckpointError(f"listing {self.location.uri} failed: {exc}") from exc
        return folders

    def manifest(self, folder: str) -> Manifest | str:
        key = f"{self.base}{folder}/{MANIFEST_NAME}"
        try:
            body = self.client.get_object(Bucket=self.location.bucket, Key=key)["Body"]
            with body:
                return _parse(body.read())
        except Exception as exc:
            code = str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                return _parse(None)
            return _Unreadable(f"reading s3://{self.location.bucket}/{key} failed: {exc}")


class _FileSource(_Source):
    def __init__(self, location: Location) -> None:
        self.root = location.path

    def id(self, folder: str) -> str:
        return os.path.join(self.root, folder)

    def tree(self) -> dict[str, Listing]:
        folders: dict[str, Listing] = {}
        try:
            entries = [
                e for e in os.scandir(self.root) if e.is_dir() and parse_step_folder(e.name) is not None
            ]
        except FileNotFoundError:
            return folders
        for entry in entries:
            listing: Listing = {}
            for dirpath, _dirs, names in os.walk(entry.path):
                for name in names:
                    full = os.path.join(dirpath, name)
                    try:
                        stat = os.stat(full)
                    except FileNotFoundError:
                        continue
                    rel = os.path.relpath(full, entry.path).replace(os.sep, "/")
                    listing[rel] = (stat.st_size, f"{stat.st_size}:{stat.st_mtime_ns}")
            folders[entry.name] = listing
        return folders

    def manifest(self, folder: str) -> Manifest | str:
        try:
            with open(os.path.join(self.root, folder, MANIFEST_NAME), "rb") as fh:
                return _parse(fh.read())
        except FileNotFoundError:
            return _parse(None)
