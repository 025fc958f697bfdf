"""The bundled digits data and its fixed train/validation split (pure, no torch)."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads.dataset import (
    DEFAULT_DATA_PATH,
    N_CLASSES,
    N_FEATURES,
    load_digits,
    parse_labeled_rows,
    split_indices,
    train_val,
)

BUNDLED_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"


def test_bundled_file_is_the_documented_copy() -> None:
    assert hashlib.sha256(DEFAULT_DATA_PATH.read_bytes()).hexdigest() == BUNDLED_SHA256
    assert BUNDLED_SHA256 in (DEFAULT_DATA_PATH.parent / "README.md").read_text()


def test_load_bundled_digits() -> None:
    ds = load_digits()
    assert len(ds) == 1797
    assert all(len(row) == N_FEATURES for row in ds.features)
    assert set(ds.labels) == set(range(N_CLASSES))
    assert min(min(r) for r in ds.features) == 0.0
    assert max(max(r) for r in ds.features) == 16.0


def test_split_is_deterministic_disjoint_and_complete() -> None:
    a, b = split_indices(1797), split_indices(1797)
    assert a == b
    assert set(a.train).isdisjoint(a.val)
    assert sorted(a.train + a.val) == list(range(1797))
    assert len(a.val) == round(1797 * 0.2)
    assert a.train[:5] != (0, 1, 2, 3, 4)  # shuffled, not file order


def test_split_does_not_depend_on_global_random_state() -> None:
    import random

    random.seed(1)
    first = split_indices(100)
    random.seed(2)
    assert split_indices(100) == first


def test_capping_train_keeps_validation_unchanged() -> None:
    ds = load_digits()
    train_all, val_all = train_val(ds)
    train_small, val_small = train_val(ds, max_train_samples=100)
    assert len(train_small) == 100
    assert val_small == val_all
    assert train_small.features == train_all.features[:100]
    assert len(train_all) + len(val_all) == len(ds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,2,3\n", "expected 65 columns"),
        (",".join(["0"] * 64) + ",12\n", "label 12 outside"),
        (",".join(["x"] * 65) + "\n", "not a number"),
        ("\n\n", "no rows"),
    ],
)
def test_bad_rows_are_rejected_with_the_line(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        parse_labeled_rows(text.splitlines(), source="f.csv")
    assert info.value.field == "data"


def test_plain_and_gzip_files(tmp_path: Path) -> None:
    rows = "\n".join(",".join(["1"] * 64 + [str(i % 10)]) for i in range(5)) + "\n"
    (tmp_path / "d.csv").write_text(rows)
    with gzip.open(tmp_path / "d.csv.gz", "wt") as fh:
        fh.write(rows)
    assert load_digits(tmp_path / "d.csv") == load_digits(tmp_path / "d.csv.gz")
    with pytest.raises(ValidationError, match="not found"):
        load_digits(tmp_path / "missing.csv")


def test_split_rejects_degenerate_input() -> None:
    with pytest.raises(ValidationError):
        split_indices(1)
    with pytest.raises(ValidationError):
        split_indices(10, val_fraction=1.0)
