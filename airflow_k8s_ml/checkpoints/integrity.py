"""Decide whether a checkpoint is intact from facts already fetched. Pure: the I/O lives in the backends.

Three levels, each a superset of the one before:

* ``none``      - the manifest parses, names the right step, and every listed object exists with its size
                  (all from one listing: no extra requests);
* ``checksums`` - plus the SHA-256 the storage recorded for each object equals the manifest's (zero bytes
                  downloaded on S3);
* ``full``      - plus the bytes themselves hash to the manifest's sha256 (everything downloaded).

Each function returns human-readable problems; an empty list means intact. Problems name the file and both
values, because "corrupt" alone sends an operator on a hunt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, get_args

from airflow_k8s_ml.errors import ValidationError

if TYPE_CHECKING:  # operators check ``verify`` with check_mode at DAG parse time: no dataclass module then
    from airflow_k8s_ml.checkpoints.manifest import Manifest, ManifestFile

VerifyMode = Literal["none", "checksums", "full"]
VERIFY_MODES: tuple[str, ...] = get_args(VerifyMode)


def check_mode(mode: str, field: str = "verify") -> VerifyMode:
    """Validate a verify mode early (operator ``__init__``) rather than deep inside a poll loop."""
    if mode not in VERIFY_MODES:
        raise ValidationError(field, f"must be one of {', '.join(VERIFY_MODES)}, got {mode!r}")
    return mode  # type: ignore[return-value]


def listing_problems(manifest: Manifest, folder_step: int, objects: Mapping[str, int]) -> list[str]:
    """Compare the manifest with a listing of the step folder (key relative to the folder -> size)."""
    problems: list[str] = []
    if manifest.step != folder_step:
        problems.append(f"MANIFEST.json says step {manifest.step} but the folder is step-{folder_step}")
    for entry in manifest.files:
        size = objects.get(entry.storage_key)
        if size is None:
            problems.append(f"{entry.path}: missing (listed in MANIFEST.json, not in storage)")
        elif size != entry.size:
            problems.append(f"{entry.path}: size {size} in storage, {entry.size} in MANIFEST.json")
    return problems


def stored_checksum_problem(entry: ManifestFile, size: int | None, stored: str | None) -> str | None:
    """Compare one object's stored size and SHA-256 checksum (from HeadObject) with its manifest entry.

    An object without a stored SHA-256 is a problem, not a pass: our writer always stores one, so its absence
    means the object was replaced after the commit (or written by another tool); ``full`` can still judge it.
    """
    if size is None:
        return f"{entry.path}: missing"
    if size != entry.size:
        return f"{entry.path}: size {size} in storage, {entry.size} in MANIFEST.json"
    if not stored:
        return f"{entry.path}: storage holds no SHA-256 checksum (replaced after commit?); use verify='full'"
    if _digest_part(stored) != _digest_part(entry.expected_s3_checksum):
        return (
            f"{entry.path}: stored SHA-256 {stored} differs from MANIFEST.json {entry.expected_s3_checksum}"
        )
    return None


def content_problem(entry: ManifestFile, size: int | None, sha256_hex: str | None) -> str | None:
    """Compare the size and sha256 of the downloaded bytes with the manifest entry."""
    if size is None or sha256_hex is None:
        return f"{entry.path}: missing"
    if size != entry.size:
        return f"{entry.path}: {size} bytes read, {entry.size} in MANIFEST.json"
    if sha256_hex != entry.sha256:
        return f"{entry.path}: sha256 {sha256_hex} differs from MANIFEST.json {entry.sha256}"
    return None


def _digest_part(checksum: str) -> str:
    """Drop a composite checksum's ``-<parts>`` suffix: some servers report it, some (moto) do not.

    Base64 has no ``-``, so the split is unambiguous; the digest of part digests already covers the content.
    """
    return checksum.split("-", 1)[0]
