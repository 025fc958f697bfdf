"""Filesystem storage for checkpoints (``file:///abs/dir``): a local disk, a PVC or NFS mount.

A commit is written into a hidden staging directory next to its final place and renamed into ``step-N`` in
one ``rename(2)``: readers see all of it or nothing, and of two writers renaming onto the same step the second
fails (the target is then a non-empty directory). A filesystem records no checksums, so "checksums" verify
falls back to hashing (see ``stores_checksums``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from stat import S_ISLNK
from typing import BinaryIO

from airflow_k8s_ml.checkpoints.backend import ContentRefused, Source
from airflow_k8s_ml.checkpoints.manifest import MANIFEST_NAME, MAX_MANIFEST_BYTES, sha256_stream
from airflow_k8s_ml.checkpoints.uri import Location
from airflow_k8s_ml.errors import CheckpointError

_CHUNK = 1024 * 1024


class FileBackend:
    """Checkpoint storage under an absolute directory."""

    stores_checksums = False

    def __init__(self, location: Location) -> None:
        self.location = location
        self.root = location.path

    def _path(self, folder: str, key: str = "") -> str:
        return os.path.join(self.root, folder, *key.split("/")) if key else os.path.join(self.root, folder)

    def _staging(self, folder: str, commit_id: str) -> str:
        return os.path.join(self.root, f".staging-{folder}-{commit_id}")

    def staging_prefix(self, commit_id: str) -> str:
        return ""

    # -- reading --------------------------------------------------------------------------------------------
    def list_folders(self) -> list[str]:
        try:
            return [e.name for e in os.scandir(self.root) if e.is_dir() and not e.name.startswith(".")]
        except FileNotFoundError:
            return []

    def list_objects(self, folder: str) -> dict[str, int]:
        """Every file under the step folder with its size; ContentRefused if the folder or anything in it is
        a symbolic link (listing follows none, so a link to ``/usr`` costs nothing and leaks nothing)."""
        top = self._path(folder)
        if os.path.islink(top):
            raise ContentRefused(f"{folder} is a symbolic link: refused")
        out: dict[str, int] = {}
        for dirpath, dirs, names in os.walk(top):
            for name in dirs + names:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, top).replace(os.sep, "/")
                stat = os.lstat(full)
                if S_ISLNK(stat.st_mode):
                    raise ContentRefused(f"{folder}/{rel} is a symbolic link: refused")
                if name in names:
                    out[rel] = stat.st_size
        return out

    def read(self, folder: str, key: str) -> bytes | None:
        """The object's bytes, at most one more than a manifest may have (only manifests are read whole)."""
        try:
            with _open_no_follow(self._path(folder, key)) as fh:
                return fh.read(MAX_MANIFEST_BYTES + 1)
        except FileNotFoundError:
            return None

    def stored_checksum(self, folder: str, key: str) -> tuple[int | None, str | None]:
        try:
            return os.lstat(self._path(folder, key)).st_size, None
        except FileNotFoundError:
            return None, None

    def hash_object(self, folder: str, key: str) -> tuple[int | None, str | None]:
        try:
            with _open_no_follow(self._path(folder, key)) as fh:
                return sha256_stream(fh)
        except FileNotFoundError:
            return None, None

    def download(self, folder: str, key: str, dest: str) -> tuple[int, str]:
        try:
            with _open_no_follow(self._path(folder, key)) as inp:
                return _copy_hashing(inp, dest)
        except FileNotFoundError as exc:
            raise CheckpointError(f"{self._path(folder, key)} is missing") from exc

    def has_manifest(self, folder: str) -> bool:
        return os.path.exists(self._path(folder, MANIFEST_NAME))

    # -- writing --------------------------------------------------------------------------------------------
    def put(self, folder: str, commit_id: str, key: str, source: Source) -> tuple[int, str, str | None]:
        dest = os.path.join(self._staging(folder, commit_id), *key.split("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if isinstance(source, bytes):
            _write_durably(dest, source)
            return len(source), hashlib.sha256(source).hexdigest(), None
        with open(source, "rb") as inp:  # the writer's own local file: a link (a model cache's) is fine
            size, sha = _copy_hashing(inp, dest)
        return size, sha, None

    def publish(self, folder: str, commit_id: str, manifest: bytes) -> None:
        staging = self._staging(folder, commit_id)
        os.makedirs(staging, exist_ok=True)
        _write_durably(os.path.join(staging, MANIFEST_NAME), manifest)
        try:
            os.rename(staging, self._path(folder))
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                what = "committed by another writer first" if self.has_manifest(folder) else "already exists"
                raise CheckpointError(
                    f"{self.location.uri}/{folder} {what}; this writer's commit is discarded"
                ) from exc
            raise CheckpointError(f"committing {self._path(folder)} failed: {exc}") from exc
        _fsync_dir(self.root)

    def discard(self, folder: str, commit_id: str) -> None:
        shutil.rmtree(self._staging(folder, commit_id), ignore_errors=True)


def _open_no_follow(path: str) -> BinaryIO:
    """Open a stored file for reading; ContentRefused if it is a symbolic link (``O_NOFOLLOW``)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ContentRefused(f"{path} is a symbolic link: refused") from exc
        raise
    return os.fdopen(fd, "rb")


def _copy_hashing(inp: BinaryIO, dest: str) -> tuple[int, str]:
    """Copy while hashing, so the sha256 describes exactly the bytes written (one read of the source)."""
    digest, size = hashlib.sha256(), 0
    with open(dest, "wb") as out:
        while block := inp.read(_CHUNK):
            digest.update(block)
            size += len(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def _write_durably(path: str, data: bytes) -> None:
    with open(path, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _fsync_dir(path: str) -> None:
    """Persist the rename itself (a crash right after commit must not lose the step folder)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
