"""``download_checkpoint``: fetch a committed checkpoint into a local directory (pod side, env credentials).

Used by training code to resume (``RESUME_FROM``) and by serving code to load a model. Every file is hashed
while it streams to disk, so verification costs no second read; files land under a temporary name and are
renamed only once their bytes match the manifest, so a failed download never leaves a plausible-looking file.
"""

from __future__ import annotations

import os
from typing import Any

from airflow_k8s_ml.checkpoints.backends import open_backend
from airflow_k8s_ml.checkpoints.integrity import content_problem
from airflow_k8s_ml.checkpoints.manifest import MANIFEST_NAME, Manifest, ManifestFile, parse_step_folder
from airflow_k8s_ml.checkpoints.uri import parse_uri
from airflow_k8s_ml.errors import CheckpointError, ValidationError


def download_checkpoint(
    uri: str, dest_dir: str, verify: bool = True, *, s3_client: Any | None = None
) -> Manifest:
    """Download the checkpoint at ``uri`` (``<base>/step-<N>/``) into ``dest_dir``; return its manifest.

    With ``verify`` each file's size and sha256 must match the manifest, else CheckpointError names the file.
    ``MANIFEST.json`` is written to ``dest_dir`` too, so the local copy is itself a valid checkpoint.
    """
    location = parse_uri(uri, "uri")
    folder = location.name
    step = parse_step_folder(folder)
    if step is None:
        raise ValidationError("uri", f"{uri!r} is not a step-<N> checkpoint folder")
    backend = open_backend(location.parent().uri, s3_client)
    raw = backend.read(folder, MANIFEST_NAME)
    if raw is None:
        raise CheckpointError(f"{uri} has no {MANIFEST_NAME}: not a complete checkpoint")
    manifest = Manifest.from_json(raw)
    if manifest.step != step:
        raise CheckpointError(f"{uri}: {MANIFEST_NAME} says step {manifest.step}")
    os.makedirs(dest_dir, exist_ok=True)
    for entry in manifest.files:
        _fetch(backend, folder, entry, dest_dir, verify, uri)
    with open(os.path.join(dest_dir, MANIFEST_NAME), "wb") as out:
        out.write(raw)
    return manifest


def _fetch(backend: Any, folder: str, entry: ManifestFile, dest_dir: str, verify: bool, uri: str) -> None:
    target = os.path.join(dest_dir, *entry.path.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    partial = f"{target}.partial"
    try:
        size, sha = backend.download(folder, entry.storage_key, partial)
        problem = content_problem(entry, size, sha) if verify else None
        if problem:
            raise CheckpointError(f"{uri}: {problem}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
