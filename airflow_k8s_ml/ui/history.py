"""The checkpoints a run has committed, as the Training tab draws them: one listing, then the manifests.

Why not :class:`~airflow_k8s_ml.checkpoints.store.CheckpointStore`: its ``list()`` lists every step folder
separately (one request per folder) and re-reads every manifest on every call. The tab is reloaded while a
run trains, so here the whole base is listed once (S3 ``ListObjectsV2`` without a delimiter, paginated),
the ``MANIFEST.json`` objects are fetched in parallel, and a parsed manifest is cached by its ETag (S3) or
its size and mtime (file://): a reload of a run with 100 checkpoints costs one listing plus the manifests
committed since the last look. Manifests are written once (conditional put), so the cache never goes stale.

Bounded, because training code writes the manifests and is less trusted than the api-server reading them: a
manifest over :data:`~airflow_k8s_ml.checkpoints.manifest.MAX_MANIFEST_BYTES` (by the listing's size) is
never fetched and shows as "too large"; the cache keeps what the tab shows (the step, the files the
completeness check needs, at most :data:`MAX_METRICS` metrics, the date; never ``extra``) and holds at most
``cache_bytes`` of it by estimate; a ``file://`` base is listed without following any symbolic link (a linked
step folder or file makes the step "refused").

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
from stat import S_ISLNK, S_ISREG
from typing import Any

from airflow_k8s_ml.checkpoints.integrity import listing_problems
from airflow_k8s_ml.checkpoints.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    Manifest,
    parse_step_folder,
    too_large,
)
from airflow_k8s_ml.checkpoints.uri import Location, parse_uri
from airflow_k8s_ml.errors import CheckpointError

__all__ = ["History", "HistoryReader", "Point", "metric_priority"]

#: key relative to a step folder -> (size, version: the ETag on S3, mtime_ns on a filesystem)
Listing = dict[str, tuple[int, str]]
#: Metrics kept per checkpoint (by :func:`metric_priority`); the rest counted in ``Point.metrics_omitted``.
MAX_METRICS = 64
#: Estimated bytes of cached manifests per api-server process.
CACHE_BYTES = 32 * 1024 * 1024


def metric_priority(name: str) -> tuple[bool, str]:
    """The order in which the tab keeps and draws metrics when it cannot show them all: losses and
    accuracies (what a gate usually checks) first, then by name."""
    lowered = name.lower()
    return ("loss" not in lowered and "acc" not in lowered, name)


@dataclass(frozen=True)
class Point:
    """One step folder: complete (with its metrics) or not (with the reason)."""

    step: int
    uri: str
    complete: bool
    metrics: dict[str, float] = field(default_factory=dict)
    created_at: str | None = None
    problem: str | None = None
    metrics_omitted: int = 0


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
        cache_bytes: int = CACHE_BYTES,
        s3_client: Callable[[str | None], Any] | None = None,
        client_ttl: float = 300.0,
    ) -> None:
        self.max_workers = max(1, max_workers)
        self.cache_size = cache_size
        self.cache_bytes = cache_bytes
        self._cached_bytes = 0
        self._make_client = s3_client or _connection_client
        self.client_ttl = client_ttl
        self._clients: dict[str | None, tuple[float, Any]] = {}
        self._manifests: OrderedDict[tuple[str, str], tuple[_Summary | str, int]] = OrderedDict()
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
            if not isinstance(objects, str)
            and MANIFEST_NAME in objects
            and objects[MANIFEST_NAME][0] <= MAX_MANIFEST_BYTES
        ]
        missing = [item for item in wanted if self._cached(source.id(item[0]), item[1]) is None]
        fetched: dict[str, _Summary | str] = {}
        for (folder, version), parsed in zip(missing, self._fetch(source, missing), strict=True):
            fetched[folder] = parsed
            if not isinstance(parsed, _Unreadable):  # a transport error is retried on the next read
                self._remember((source.id(folder), version), parsed)
        points = []
        for folder, objects in folders.items():
            step = parse_step_folder(folder)
            if step is None:
                continue
            if isinstance(objects, str):  # refused (a symbolic link)
                points.append(Point(step, f"{location.uri}/{folder}/", False, problem=objects))
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

    def _fetch(self, source: _Source, items: list[tuple[str, str]]) -> Iterable[_Summary | str]:
        if len(items) <= 1:
            return [source.manifest(folder) for folder, _ in items]
        return self._pool.map(lambda item: source.manifest(item[0]), items)

    def _cached(self, folder_id: str, version: str) -> _Summary | str | None:
        if not version:
            return None
        with self._lock:
            entry = self._manifests.get((folder_id, version))
            if entry is None:
                return None
            self._manifests.move_to_end((folder_id, version))
            return entry[0]

    def _remember(self, key: tuple[str, str], value: _Summary | str) -> None:
        cost = _cost(value)
        if cost > self.cache_bytes:
            return
        with self._lock:
            old = self._manifests.pop(key, None)
            self._cached_bytes += cost - (old[1] if old else 0)
            self._manifests[key] = (value, cost)
            while len(self._manifests) > self.cache_size or self._cached_bytes > self.cache_bytes:
                self._cached_bytes -= self._manifests.popitem(last=False)[1][1]


def _cost(value: _Summary | str) -> int:
    """Rough bytes a cached entry holds (Python objects included): enough to bound the cache's memory."""
    if isinstance(value, str):
        return 100 + len(value)
    files = sum(200 + len(f.path) + len(f.key) for f in value.manifest.files)
    return 500 + files + sum(120 + len(name) for name in value.manifest.metrics)


@dataclass(frozen=True)
class _Summary:
    """What the tab shows and checks of a manifest: no ``extra``, at most :data:`MAX_METRICS` metrics."""

    manifest: Manifest
    metrics_omitted: int

    @classmethod
    def of(cls, manifest: Manifest) -> _Summary:
        names = sorted(manifest.metrics, key=metric_priority)
        kept = {name: manifest.metrics[name] for name in names[:MAX_METRICS]}
        slim = Manifest(manifest.step, manifest.files, kept, manifest.created_at)
        return cls(slim, len(names) - len(kept))


def _point(uri: str, step: int, objects: Listing, summary: _Summary | str | None) -> Point:
    size = objects.get(MANIFEST_NAME, (0, ""))[0]
    if size > MAX_MANIFEST_BYTES:
        return Point(step, uri, False, problem=too_large(size))
    if summary is None:
        count = len(objects)
        return Point(step, uri, False, problem=f"no {MANIFEST_NAME} yet ({count} objects): not committed")
    if isinstance(summary, str):
        return Point(step, uri, False, problem=summary)
    manifest = summary.manifest
    problems = listing_problems(manifest, step, {key: size for key, (size, _) in objects.items()})
    return Point(
        step,
        uri,
        not problems,
        metrics=dict(manifest.metrics),
        created_at=manifest.created_at or None,
        problem="; ".join(problems[:3]) if problems else None,
        metrics_omitted=summary.metrics_omitted,
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

    def tree(self) -> dict[str, Listing | str]:
        """Step folder -> its objects, or why the folder is refused."""
        raise NotImplementedError

    def manifest(self, folder: str) -> _Summary | str:
        raise NotImplementedError


def _parse(raw: bytes | None) -> _Summary | str:
    if raw is None:
        return f"{MANIFEST_NAME} vanished while reading"
    try:
        return _Summary.of(Manifest.from_json(raw))
    except CheckpointError as exc:
        return str(exc)


class _S3Source(_Source):
    def __init__(self, location: Location, client: Any) -> None:
        self.location = location
        self.client = client
        self.base = f"{location.prefix}/" if location.prefix else ""

    def id(self, folder: str) -> str:
        return f"s3://{self.location.bucket}/{self.base}{folder}"

    def tree(self) -> dict[str, Listing | str]:
        folders: dict[str, Listing | str] = {}
        listings: dict[str, Listing] = {}
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.location.bucket, Prefix=self.base):
                for obj in page.get("Contents", []):
                    folder, _, key = obj["Key"][len(self.base) :].partition("/")
                    if key and parse_step_folder(folder) is not None:
                        listings.setdefault(folder, {})[key] = (int(obj["Size"]), str(obj.get("ETag", "")))
        except Exception as exc:
            raise CheckpointError(f"listing {self.location.uri} failed: {exc}") from exc
        folders.update(listings)
        return folders

    def manifest(self, folder: str) -> _Summary | str:
        key = f"{self.base}{folder}/{MANIFEST_NAME}"
        try:
            body = self.client.get_object(Bucket=self.location.bucket, Key=key)["Body"]
            with body:
                return _parse(body.read(MAX_MANIFEST_BYTES + 1))
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

    def tree(self) -> dict[str, Listing | str]:
        folders: dict[str, Listing | str] = {}
        try:
            entries = [e for e in os.scandir(self.root) if parse_step_folder(e.name) is not None]
        except FileNotFoundError:
            return folders
        for entry in entries:
            if entry.is_symlink():
                folders[entry.name] = f"{entry.name} is a symbolic link: refused"
            elif entry.is_dir(follow_symlinks=False):
                folders[entry.name] = _walk(entry.path, entry.name)
        return folders

    def manifest(self, folder: str) -> _Summary | str:
        path = os.path.join(self.root, folder, MANIFEST_NAME)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return _parse(None)
        except OSError as exc:
            return f"{folder}/{MANIFEST_NAME} could not be read: {exc.strerror}"
        with os.fdopen(fd, "rb") as fh:
            return _parse(fh.read(MAX_MANIFEST_BYTES + 1))


def _walk(top: str, name: str) -> Listing | str:
    """Every file under one step folder, following no symbolic link; the refusal when one is found."""
    listing: Listing = {}
    for dirpath, dirs, names in os.walk(top):
        for child in dirs + names:
            full = os.path.join(dirpath, child)
            try:
                stat = os.lstat(full)
            except FileNotFoundError:
                continue
            rel = os.path.relpath(full, top).replace(os.sep, "/")
            if S_ISLNK(stat.st_mode):
                return f"{name}/{rel} is a symbolic link: refused"
            if S_ISREG(stat.st_mode):
                listing[rel] = (stat.st_size, f"{stat.st_size}:{stat.st_mtime_ns}")
    return listing
