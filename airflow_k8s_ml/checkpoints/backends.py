"""``open_backend``: the storage backend for a checkpoint URI, ``file://`` or ``s3://``.

Why a module of its own: the two backends implement :class:`~airflow_k8s_ml.checkpoints.backend.Backend`
and import that module, so the choice between them lives above all three (no import circle).
"""

from __future__ import annotations

from airflow_k8s_ml.checkpoints.backend import Backend

__all__ = ["open_backend"]


def open_backend(uri: str, s3_client: object | None = None, field: str = "uri") -> Backend:
    """A backend for ``uri``. For ``s3://`` without a client, build one from the environment (pod side).
    The backends load here, when asked: ``s3_backend`` needs boto3."""
    from airflow_k8s_ml.checkpoints.uri import parse_uri

    location = parse_uri(uri, field)
    if location.scheme == "file":
        from airflow_k8s_ml.checkpoints.file_backend import FileBackend

        return FileBackend(location)
    from airflow_k8s_ml.checkpoints.s3_backend import S3Backend, env_s3_client

    return S3Backend(location, s3_client if s3_client is not None else env_s3_client())
