"""The storage interface the writer, the store and the downloader share, so ``s3://`` and ``file://``
differ in exactly one place.

Keys are relative to a step folder (``step-3``) under the base location. Writes go through a *staging* area
named by a per-commit id and become visible only at :meth:`Backend.publish`, which is atomic: S3 uses a
conditional ``MANIFEST.json`` write (``If-None-Match: *``), a filesystem a directory rename.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from airflow_k8s_ml.errors import CheckpointError

if TYPE_CHECKING:
    from airflow_k8s_ml.checkpoints.uri import Location

Source = str | bytes
"""A local file path or the bytes themselves."""


class ContentRefused(CheckpointError):
    """The storage itself refused an object's bytes as not matching the checksum it recorded for them, or a
    ``file://`` checkpoint holds a symbolic link (never followed: training code could point it anywhere).

    Why a class of its own: that is corruption at rest, a property of the checkpoint (the store reports it
    as a problem, so ``allow_older`` can pass over it), not a failure to reach the storage (which must fail
    the task rather than silently fall back to an older checkpoint).
    """


class Backend(Protocol):
    """What a storage kind must offer. Missing objects are reported as ``None``, never raised."""

    location: Location
    stores_checksums: bool
    """True when the storage records a SHA-256 per object that can be read without the bytes (S3)."""

    def list_folders(self) -> list[str]:
        """Names of the folders directly under the base (``step-1``, ``step-2``, ...; others ignored)."""
        ...

    def list_objects(self, folder: str) -> dict[str, int]:
        """Every object under ``folder``, recursively: key relative to the folder -> size in bytes."""
        ...

    def read(self, folder: str, key: str) -> bytes | None:
        """A small object's bytes (the manifest), or None if absent; at most ``MAX_MANIFEST_BYTES + 1`` bytes
        are read, so an oversized one is refused by the parser without being held whole."""
        ...

    def stored_checksum(self, folder: str, key: str) -> tuple[int | None, str | None]:
        """Size and stored base64 SHA-256 checksum without reading the bytes; ``(None, None)`` if absent."""
        ...

    def hash_object(self, folder: str, key: str) -> tuple[int | None, str | None]:
        """Size and hex sha256 of the bytes, streamed; ``(None, None)`` if absent; :class:`ContentRefused`
        if the storage refuses the bytes as not matching its own checksum."""
        ...

    def download(self, folder: str, key: str, dest: str) -> tuple[int, str]:
        """Copy an object to the local file ``dest``; returns size and hex sha256 of what was written."""
        ...

    def staging_prefix(self, commit_id: str) -> str:
        """Key prefix (relative to the step folder) that a commit's files get once published."""
        ...

    def has_manifest(self, folder: str) -> bool:
        """Whether ``folder`` is already committed: lets a writer fail before uploading gigabytes."""
        ...

    def put(self, folder: str, commit_id: str, key: str, source: Source) -> tuple[int, str, str | None]:
        """Stage one file; returns size, hex sha256 and the storage checksum if it is not plain sha256."""
        ...

    def publish(self, folder: str, commit_id: str, manifest: bytes) -> None:
        """Make the staged commit visible atomically; CheckpointError if the folder is already committed."""
        ...

    def discard(self, folder: str, commit_id: str) -> None:
        """Best-effort removal of a commit's staged files after a failure or a lost race."""
        ...
