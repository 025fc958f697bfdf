"""Checkpoints on S3 or a filesystem: atomic commit, newest complete, integrity without download, resume.

Import-light on purpose: DAG files and pods import this package, so names resolve lazily on first access and
nothing here imports boto3 or Airflow until a function that needs them runs. See ``docs/checkpoints.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_k8s_ml._lazy import lazy_exports

if TYPE_CHECKING:
    from airflow_k8s_ml.checkpoints.download import download_checkpoint
    from airflow_k8s_ml.checkpoints.integrity import VerifyMode
    from airflow_k8s_ml.checkpoints.manifest import Manifest, ManifestFile
    from airflow_k8s_ml.checkpoints.resume import resolve_resume, resume_point
    from airflow_k8s_ml.checkpoints.rules import MetricRule, evaluate, parse_rules
    from airflow_k8s_ml.checkpoints.run_paths import run_folder
    from airflow_k8s_ml.checkpoints.store import Checkpoint, CheckpointStore, Scan
    from airflow_k8s_ml.checkpoints.writer import CheckpointWriter

_LAZY = {
    "CheckpointWriter": "writer",
    "CheckpointStore": "store",
    "Checkpoint": "store",
    "Scan": "store",
    "download_checkpoint": "download",
    "resolve_resume": "resume",
    "resume_point": "resume",
    "Manifest": "manifest",
    "ManifestFile": "manifest",
    "MetricRule": "rules",
    "parse_rules": "rules",
    "evaluate": "rules",
    "VerifyMode": "integrity",
    "run_folder": "run_paths",
}

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "CheckpointWriter",
    "Manifest",
    "ManifestFile",
    "MetricRule",
    "Scan",
    "VerifyMode",
    "download_checkpoint",
    "evaluate",
    "parse_rules",
    "resolve_resume",
    "resume_point",
    "run_folder",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
