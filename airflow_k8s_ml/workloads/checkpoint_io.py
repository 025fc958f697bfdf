"""Fetch and commit digits-model checkpoints through :mod:`airflow_k8s_ml.checkpoints` (torch lazily).

The checkpoints package owns the layout, the manifest and integrity; this module only decides which files a
digits checkpoint holds (``model.pt``, ``trainer_state.pt``, ``history.jsonl``) and turns them back into a
model. Every load verifies the manifest first, so a half-written checkpoint is never served or resumed from.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.errors import CheckpointError

if TYPE_CHECKING:
    from airflow_k8s_ml.workloads.model import DigitsMLP, TrainerState

FRAMEWORK = "pytorch"
MODEL_FILE = "model.pt"
TRAINER_STATE_FILE = "trainer_state.pt"
HISTORY_FILE = "history.jsonl"


@dataclass
class LoadedCheckpoint:
    """A model restored from a committed checkpoint, with where it came from."""

    model: DigitsMLP
    uri: str
    step: int
    metrics: dict[str, Any] = field(default_factory=dict)
    trainer_state: TrainerState | None = None
    history: list[dict[str, Any]] = field(default_factory=list)


def parse_history(data: bytes) -> list[dict[str, Any]]:
    """``history.jsonl`` -> list of per-epoch records (blank lines ignored)."""
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def format_history(history: Sequence[Mapping[str, Any]]) -> bytes:
    """Per-epoch records -> ``history.jsonl`` bytes (one compact JSON object per line)."""
    return "".join(json.dumps(dict(h), separators=(",", ":")) + "\n" for h in history).encode("utf-8")


def load_checkpoint(uri: str, with_trainer_state: bool = False) -> LoadedCheckpoint:
    """Download ``uri`` (a ``.../step-N/`` folder) with manifest verification and rebuild the model.

    ``with_trainer_state`` is for resume: it also requires ``trainer_state.pt`` and reads the history so the
    training curve continues instead of restarting.
    """
    from airflow_k8s_ml.checkpoints import download_checkpoint

    with tempfile.TemporaryDirectory(prefix="ckpt-") as tmp:
        manifest = download_checkpoint(uri, tmp, verify=True)
        # torch only now: a missing or corrupt checkpoint fails in well under a second, before the import
        from airflow_k8s_ml.workloads.model import load_model, load_trainer_state

        folder = Path(tmp)
        model = load_model(folder / MODEL_FILE)
        loaded = LoadedCheckpoint(model, uri, int(manifest.step), dict(manifest.metrics or {}))
        if with_trainer_state:
            loaded.trainer_state = load_trainer_state(folder / TRAINER_STATE_FILE)
            history_path = folder / HISTORY_FILE
            if history_path.is_file():
                try:
                    loaded.history = parse_history(history_path.read_bytes())
                except ValueError as exc:
                    raise CheckpointError(f"{uri}: unreadable {HISTORY_FILE}: {exc}") from exc
    return loaded


def commit_checkpoint(
    base_uri: str,
    step: int,
    model: DigitsMLP,
    trainer_state: TrainerState,
    history: Sequence[Mapping[str, Any]],
    metrics: Mapping[str, float],
) -> str:
    """Write the three files to a temp dir and commit them as ``<base_uri>/step-<step>/``; returns its URI."""
    from airflow_k8s_ml.checkpoints import CheckpointWriter
    from airflow_k8s_ml.workloads.model import save_model, save_trainer_state

    with tempfile.TemporaryDirectory(prefix="ckpt-") as tmp:
        folder = Path(tmp)
        save_model(folder / MODEL_FILE, model)
        save_trainer_state(folder / TRAINER_STATE_FILE, trainer_state)
        files: dict[str, str | bytes] = {
            MODEL_FILE: str(folder / MODEL_FILE),
            TRAINER_STATE_FILE: str(folder / TRAINER_STATE_FILE),
            HISTORY_FILE: format_history(history),
        }
        uri: str = CheckpointWriter(base_uri).commit(
            step=step, files=files, metrics=dict(metrics), framework=FRAMEWORK
        )
    return uri
