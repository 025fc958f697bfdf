"""Parse checkpoint locations (``s3://bucket/prefix`` and ``file:///abs/path``) into one typed value.

Pure: no I/O. Every other module works on :class:`Location` so the two storage kinds share one grammar and the
same mistakes (a relative path, a bucket-less URI) are rejected once, with the argument named.
"""

from __future__ import annotations

import posixpath
from typing import Literal
from urllib.parse import unquote, urlsplit

from airflow_k8s_ml.errors import ValidationError

Scheme = Literal["s3", "file"]


class Location:
    """A storage prefix: for ``s3`` a bucket plus key prefix, for ``file`` an absolute directory.

    ``prefix`` never has a leading or trailing slash (``""`` is the bucket root); ``path`` is the absolute
    directory for ``file`` and ``""`` for ``s3``. An immutable value (equal by its fields, hashable).

    (A plain class, not a dataclass: operators parse literal URIs at DAG parse time, in a fresh
    dag-processor fork each time, and a dataclass costs code generation when its module is imported.)
    """

    __slots__ = ("bucket", "path", "prefix", "scheme")

    scheme: Scheme
    bucket: str
    prefix: str
    path: str

    def __init__(self, scheme: Scheme, bucket: str = "", prefix: str = "", path: str = "") -> None:
        object.__setattr__(self, "scheme", scheme)
        object.__setattr__(self, "bucket", bucket)
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "path", path)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Location is immutable; cannot set {name}")

    def _fields(self) -> tuple[str, str, str, str]:
        return (self.scheme, self.bucket, self.prefix, self.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Location(scheme={self.scheme!r}, bucket={self.bucket!r}, prefix={self.prefix!r}, "
            f"path={self.path!r})"
        )

    @property
    def uri(self) -> str:
        """Canonical URI without a trailing slash (``s3://b/models/run1``, ``file:///data/run1``)."""
        if self.scheme == "s3":
            return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"file://{self.path}"

    def child(self, name: str) -> Location:
        """The location one folder below this one (``name`` is a single relative segment or path)."""
        name = name.strip("/")
        if self.scheme == "s3":
            return Location("s3", self.bucket, f"{self.prefix}/{name}" if self.prefix else name)
        return Location("file", path=posixpath.join(self.path, name))

    def parent(self) -> Location:
        """The folder above (used to find the base of a step URI)."""
        if self.scheme == "s3":
            return Location("s3", self.bucket, posixpath.dirname(self.prefix))
        return Location("file", path=posixpath.dirname(self.path) or "/")

    @property
    def name(self) -> str:
        """Last path segment (``step-3`` for ``s3://b/run1/step-3/``)."""
        return posixpath.basename(self.prefix if self.scheme == "s3" else self.path)


def parse_uri(uri: str, field: str = "uri") -> Location:
    """Parse ``s3://bucket[/prefix]``, ``file:///abs/dir`` or a bare absolute path into a :class:`Location`.

    A bare absolute path is accepted because pods mount volumes at plain paths; relative paths are refused
    because what they mean depends on the working directory of whichever process reads them.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise ValidationError(field, f"expected an s3:// or file:// URI, got {uri!r}")
    uri = uri.strip()
    if uri.startswith("/"):
        return Location("file", path=_clean_path(uri, field))
    parts = urlsplit(uri)
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ValidationError(field, f"{uri!r} has no bucket (expected s3://bucket/prefix)")
        prefix = parts.path.strip("/")
        if prefix and any(seg in ("", ".", "..") for seg in prefix.split("/")):
            raise ValidationError(field, f"{uri!r} has an empty, '.' or '..' segment")
        return Location("s3", parts.netloc, prefix)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValidationError(field, f"{uri!r}: file URIs must be local (file:///abs/path)")
        return Location("file", path=_clean_path(unquote(parts.path), field))
    raise ValidationError(field, f"unsupported scheme in {uri!r}; use s3://bucket/prefix or file:///abs/path")


def _clean_path(path: str, field: str) -> str:
    if not path.startswith("/"):
        raise ValidationError(field, f"file path must be absolute, got {path!r}")
    if ".." in path.split("/"):
        raise ValidationError(field, f"file path must not contain '..': {path!r}")
    return posixpath.normpath(path)
