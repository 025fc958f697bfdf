"""The digits classifier and its two checkpoint files.

A checkpoint folder holds ``model.pt`` (architecture + weights: all that serving needs) and
``trainer_state.pt`` (optimizer state, epoch, global step: only resume needs it), so ``serve`` and
``batch_predict`` never load optimizer state. Both are plain dicts of tensors and primitives loaded with
``torch.load(weights_only=True)``: loading a checkpoint never runs pickled code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from airflow_k8s_ml.errors import CheckpointError
from airflow_k8s_ml.workloads.dataset import N_CLASSES, N_FEATURES, PIXEL_MAX

MODEL_FORMAT = "airflow-k8s-ml/digits-mlp"
MODEL_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Architecture:
    """The shape of the MLP; stored in ``model.pt`` so a checkpoint loads without outside knowledge."""

    n_features: int = N_FEATURES
    hidden: tuple[int, ...] = (128, 64)
    n_classes: int = N_CLASSES


class DigitsMLP(nn.Module):
    """A small MLP on raw 0..16 pixel values; scaling to 0..1 is inside the model so callers send raw rows."""

    def __init__(self, arch: Architecture = Architecture()) -> None:
        super().__init__()
        self.arch = arch
        layers: list[nn.Module] = []
        width = arch.n_features
        for hidden in arch.hidden:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, arch.n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(batch, n_classes)`` for raw pixel rows of shape ``(batch, n_features)``."""
        return self.net(x / PIXEL_MAX)


def save_model(path: Path, model: DigitsMLP) -> None:
    """Write ``model.pt``: format tag, architecture and weights."""
    arch = asdict(model.arch)
    arch["hidden"] = list(model.arch.hidden)
    torch.save(
        {
            "format": MODEL_FORMAT,
            "version": MODEL_FORMAT_VERSION,
            "arch": arch,
            "state_dict": model.state_dict(),
        },
        path,
    )


def _load_dict(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint file missing: {path.name}")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"cannot read {path.name}: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path.name} is not a checkpoint dict")
    return data


def load_model(path: Path) -> DigitsMLP:
    """Rebuild the model from ``model.pt``; a foreign or incompatible file is a :class:`CheckpointError`."""
    data = _load_dict(path)
    if data.get("format") != MODEL_FORMAT:
        raise CheckpointError(f"{path.name} is not a {MODEL_FORMAT} model (format={data.get('format')!r})")
    raw = data.get("arch") or {}
    try:
        arch = Architecture(
            int(raw["n_features"]), tuple(int(h) for h in raw["hidden"]), int(raw["n_classes"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path.name}: bad architecture {raw!r}") from exc
    if (arch.n_features, arch.n_classes) != (N_FEATURES, N_CLASSES):
        raise CheckpointError(
            f"{path.name}: model is {arch.n_features}->{arch.n_classes}, need digits 64->10"
        )
    model = DigitsMLP(arch)
    try:
        model.load_state_dict(data["state_dict"])
    except (KeyError, RuntimeError) as exc:
        raise CheckpointError(f"{path.name}: weights do not match the architecture: {exc}") from exc
    return model


@dataclass(frozen=True)
class TrainerState:
    """Where training stopped: the last completed epoch, the global optimizer step and the optimizer state."""

    epoch: int
    global_step: int
    optimizer: dict[str, Any]


def save_trainer_state(path: Path, state: TrainerState) -> None:
    """Write ``trainer_state.pt`` (what resume needs beyond the weights)."""
    torch.save({"epoch": state.epoch, "global_step": state.global_step, "optimizer": state.optimizer}, path)


def load_trainer_state(path: Path) -> TrainerState:
    """Read ``trainer_state.pt``; a checkpoint without it (only weights) can warm-start but not resume."""
    data = _load_dict(path)
    try:
        return TrainerState(int(data["epoch"]), int(data["global_step"]), dict(data["optimizer"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path.name}: incomplete trainer state ({exc})") from exc


def predict(model: DigitsMLP, rows: list[tuple[float, ...]] | torch.Tensor) -> list[int]:
    """Class indices for raw pixel rows (no grad, eval mode)."""
    x = rows if isinstance(rows, torch.Tensor) else torch.tensor(rows, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return [int(i) for i in model(x).argmax(dim=1).tolist()]
