"""The checkpoint format: step-folder naming, ``MANIFEST.json`` and the hash helpers that fill it.

Pure (hashing reads a file you name, nothing else). A checkpoint is ``<base>/step-<N>/`` with a
``MANIFEST.json`` written last; the manifest is the only thing that makes the folder a checkpoint, so its
parser is strict: anything malformed raises :class:`~airflow_k8s_ml.errors.CheckpointError` and the folder
counts as incomplete.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO

from airflow_k8s_ml.errors import CheckpointError, ValidationError

MANIFEST_NAME = "MANIFEST.json"
FORMAT = "airflow-k8s-ml.checkpoint/v1"
_STEP_RE = re.compile(r"^step-(\d+)$")
_CHUNK = 1024 * 1024
#: The largest ``MANIFEST.json`` any reader accepts (the Training tab, the gate, resume, download). Training
#: code writes the manifest and is less trusted than the platform reading it: unbounded, a 12 MB manifest
#: costs the api-server hundreds of MB once parsed. 4 MiB holds a manifest of some 20,000 files.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024


def step_folder(step: int) -> str:
    """Folder name for ``step``: ``step-3`` (no zero padding; listings sort numerically, not lexically)."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValidationError("step", f"must be a non-negative integer, got {step!r}")
    return f"step-{step}"


def parse_step_folder(name: str) -> int | None:
    """Step number of a folder name, or None if it is not a step folder.

    Leading zeros are accepted (``step-007`` is step 7) so checkpoints written by padding tools sort right.
    """
    match = _STEP_RE.match(name.strip("/"))
    return int(match.group(1)) if match else None


def too_large(size: int) -> str:
    """The one wording of a refused oversized manifest (the tab shows it as the step's problem)."""
    return f"{MANIFEST_NAME} too large ({size:,} bytes; the limit is {MAX_MANIFEST_BYTES:,})"


def utc_now_iso() -> str:
    """Creation timestamp in the one format manifests use: ISO 8601, UTC, millisecond precision, ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str | datetime) -> datetime:
    """Parse an ISO 8601 timestamp (``Z`` allowed); a naive value is taken as UTC."""
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def sha256_file(path: str, chunk: int = _CHUNK) -> tuple[int, str]:
    """Size and hex sha256 of a local file, streamed so multi-GB shards do not need the memory."""
    with open(path, "rb") as fh:
        return sha256_stream(fh, chunk)


def sha256_stream(stream: BinaryIO | Any, chunk: int = _CHUNK) -> tuple[int, str]:
    """Size and hex sha256 of everything readable from ``stream`` (a file or a botocore body)."""
    digest, size = hashlib.sha256(), 0
    while block := stream.read(chunk):
        digest.update(block)
        size += len(block)
    return size, digest.hexdigest()


def hex_to_b64(hex_digest: str) -> str:
    """S3 reports SHA-256 checksums base64-encoded; manifests keep hex (what ``sha256sum`` prints)."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def composite_sha256(part_digests: Iterable[bytes]) -> str:
    """The checksum S3 stores for a multipart object: ``b64(sha256(d1 || d2 || ...))-<parts>``.

    It is not the sha256 of the object, so the writer records it next to the real sha256 for a zero-download
    verify of large (multipart) files.
    """
    digests = list(part_digests)
    combined = hashlib.sha256(b"".join(digests)).digest()
    return f"{base64.b64encode(combined).decode('ascii')}-{len(digests)}"


def check_relative_path(path: str, field: str = "path") -> str:
    """Refuse paths that could escape the checkpoint folder on download (absolute, ``..``, backslashes)."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path:
        raise ValidationError(field, f"must be a relative POSIX path, got {path!r}")
    if any(seg in ("", ".", "..") for seg in path.split("/")):
        raise ValidationError(field, f"must not contain empty, '.' or '..' segments: {path!r}")
    return path


@dataclass(frozen=True)
class ManifestFile:
    """One file of a checkpoint.

    ``path`` is where the file lands when downloaded (relative to the checkpoint); ``key`` is where it is
    stored relative to the step folder (S3 writers put data under a per-commit folder so racing writers never
    overwrite each other's bytes). ``s3_checksum`` is set only for multipart uploads (see
    :func:`composite_sha256`).
    """

    path: str
    size: int
    sha256: str
    key: str = ""
    s3_checksum: str | None = None

    @property
    def storage_key(self) -> str:
        return self.key or self.path

    @property
    def expected_s3_checksum(self) -> str:
        """The ``ChecksumSHA256`` value S3 should report for this object."""
        return self.s3_checksum or hex_to_b64(self.sha256)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "size": self.size, "sha256": self.sha256}
        if self.key and self.key != self.path:
            out["key"] = self.key
        if self.s3_checksum:
            out["s3_checksum"] = self.s3_checksum
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> ManifestFile:
        if not isinstance(raw, dict):
            raise CheckpointError(f"manifest file entry is not an object: {raw!r}")
        try:
            path = check_relative_path(raw["path"], "files[].path")
            key = check_relative_path(raw.get("key") or path, "files[].key")
            size, sha = raw["size"], raw["sha256"]
        except (KeyError, ValidationError) as exc:
            raise CheckpointError(f"manifest file entry invalid: {exc}") from exc
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise CheckpointError(f"manifest file {path!r}: size must be a non-negative integer")
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise CheckpointError(f"manifest file {path!r}: sha256 must be 64 lowercase hex digits")
        s3_checksum = raw.get("s3_checksum")
        if s3_checksum is not None and not isinstance(s3_checksum, str):
            raise CheckpointError(f"manifest file {path!r}: s3_checksum must be a string")
        return cls(path, size, sha, key if key != path else "", s3_checksum)


@dataclass(frozen=True)
class Manifest:
    """Contents of ``MANIFEST.json``: what a complete checkpoint holds and how well the model did."""

    step: int
    files: tuple[ManifestFile, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)
    created_at: str = ""
    framework: str | None = None
    commit_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT,
            "step": self.step,
            "created_at": self.created_at,
            "framework": self.framework,
            "commit_id": self.commit_id,
            "metrics": dict(self.metrics),
            "files": [f.to_dict() for f in self.files],
        }
        if self.extra:
            body["extra"] = dict(self.extra)
        return json.dumps(body, indent=2, sort_keys=False, allow_nan=False).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str) -> Manifest:
        """Parse and validate; CheckpointError naming what is wrong (so it can become a ``problem``)."""
        if len(data) > MAX_MANIFEST_BYTES:
            raise CheckpointError(too_large(len(data)))
        try:
            raw = json.loads(data)
        except ValueError as exc:
            raise CheckpointError(f"MANIFEST.json is not valid JSON: {exc}") from exc
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise CheckpointError(f"MANIFEST.json has no 'format: {FORMAT}' marker")
        step = raw.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(f"MANIFEST.json step must be a non-negative integer, got {step!r}")
        files_raw = raw.get("files")
        if not isinstance(files_raw, list):
            raise CheckpointError("MANIFEST.json 'files' must be a list")
        files = tuple(ManifestFile.from_dict(f) for f in files_raw)
        if len({f.path for f in files}) != len(files):
            raise CheckpointError("MANIFEST.json lists the same path twice")
        return cls(
            step=step,
            files=files,
            metrics=_metrics_from_raw(raw.get("metrics") or {}),
            created_at=str(raw.get("created_at") or ""),
            framework=raw.get("framework"),
            commit_id=raw.get("commit_id"),
            extra=raw.get("extra") or {},
        )


def _metrics_from_raw(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise CheckpointError("MANIFEST.json 'metrics' must be an object")
    out: dict[str, float] = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CheckpointError(f"MANIFEST.json metric {name!r} is not a number: {value!r}")
        out[str(name)] = float(value)
    return out


def clean_metrics(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    """Validate metrics at commit time: finite numbers only, so a gate never compares NaN or a string."""
    out: dict[str, float] = {}
    for name, value in (metrics or {}).items():
        if isinstance(value, bool) or (
            not isinstance(value, int | float) and not hasattr(value, "__float__")
        ):
            raise ValidationError(f"metrics.{name}", f"must be a number, got {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise ValidationError(f"metrics.{name}", f"must be finite, got {number!r}")
        out[str(name)] = number
    return out
