"""The bundled digits data set: loading and a train/validation split that never changes between runs.

Pure stdlib (no torch, no numpy) so it is cheap to test and reusable by the seeding step. The split is fixed
by ``SPLIT_SEED`` and independent of the training ``--seed`` on purpose: a resumed run, a warm-started run and
the batch inputs written by ``seed`` must all agree on which rows are held out, or validation accuracy would
be measured on training data.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_k8s_ml.errors import ValidationError

N_FEATURES = 64
N_CLASSES = 10
#: Pixel values are counts of "on" pixels in a 4x4 block: 0..16. The model divides by this.
PIXEL_MAX = 16.0
DEFAULT_DATA_PATH = Path(__file__).resolve().parent / "data" / "digits.csv.gz"
SPLIT_SEED = 20240601
DEFAULT_VAL_FRACTION = 0.2


@dataclass(frozen=True)
class Dataset:
    """Rows of 64 pixel values with their class labels, in file order."""

    features: tuple[tuple[float, ...], ...]
    labels: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: Sequence[int]) -> Dataset:
        """The rows at ``indices``, in that order."""
        return Dataset(tuple(self.features[i] for i in indices), tuple(self.labels[i] for i in indices))


@dataclass(frozen=True)
class Split:
    """Row indices of the training and the held-out validation part."""

    train: tuple[int, ...]
    val: tuple[int, ...]


def parse_labeled_rows(lines: Iterable[str], source: str = "<data>") -> Dataset:
    """Parse ``64 features + label`` CSV lines (the digits.csv format). Blank lines are skipped.

    Raises :class:`ValidationError` naming the line, so a wrong ``--data`` file fails with a clear message.
    """
    features: list[tuple[float, ...]] = []
    labels: list[int] = []
    for lineno, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        cells = text.split(",")
        if len(cells) != N_FEATURES + 1:
            raise ValidationError(
                "data", f"{source}:{lineno}: expected {N_FEATURES + 1} columns, got {len(cells)}"
            )
        try:
            row = tuple(float(c) for c in cells[:N_FEATURES])
            label = int(float(cells[N_FEATURES]))
        except ValueError as exc:
            raise ValidationError("data", f"{source}:{lineno}: not a number ({exc})") from exc
        if not 0 <= label < N_CLASSES:
            raise ValidationError("data", f"{source}:{lineno}: label {label} outside 0..{N_CLASSES - 1}")
        features.append(row)
        labels.append(label)
    if not labels:
        raise ValidationError("data", f"{source}: no rows")
    return Dataset(tuple(features), tuple(labels))


def load_digits(path: str | Path = DEFAULT_DATA_PATH) -> Dataset:
    """Load a digits CSV file, gzip-compressed if its name ends in ``.gz``."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError("data", f"data file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return parse_labeled_rows(fh, source=str(path))


def split_indices(
    n_rows: int, val_fraction: float = DEFAULT_VAL_FRACTION, split_seed: int = SPLIT_SEED
) -> Split:
    """Shuffle ``range(n_rows)`` with a fixed seed and cut off the last ``val_fraction`` as validation.

    ``random.Random(int).shuffle`` is stable across CPython versions, so the split is reproducible anywhere.
    """
    if n_rows < 2:
        raise ValidationError("data", f"need at least 2 rows to split, got {n_rows}")
    if not 0.0 < val_fraction < 1.0:
        raise ValidationError("val_fraction", f"must be in (0, 1), got {val_fraction}")
    order = list(range(n_rows))
    random.Random(split_seed).shuffle(order)
    n_val = min(n_rows - 1, max(1, round(n_rows * val_fraction)))
    return Split(train=tuple(order[: n_rows - n_val]), val=tuple(order[n_rows - n_val :]))


def train_val(
    dataset: Dataset, max_train_samples: int | None = None, val_fraction: float = DEFAULT_VAL_FRACTION
) -> tuple[Dataset, Dataset]:
    """The training and validation parts; ``max_train_samples`` keeps the first N of the shuffled train part.

    Capping the training part never changes the validation part, so metrics stay comparable across runs.
    """
    split = split_indices(len(dataset), val_fraction)
    train = split.train if max_train_samples is None else split.train[:max_train_samples]
    return dataset.subset(train), dataset.subset(split.val)
