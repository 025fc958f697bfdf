"""Validating prediction inputs and parsing batch files: pure, shared by ``serve`` and ``batch_predict``.

Both entrypoints accept the same thing, a row of 64 raw pixel values (0..16, as in the data set), so the
checks live here once. Errors are :class:`ValidationError` with a message that says which row is wrong: the
HTTP server returns it as a 400 body, the batch job exits with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads.dataset import N_CLASSES, N_FEATURES

#: File name suffixes ``batch_predict`` reads; other files under the input prefix are skipped.
CSV_SUFFIXES = (".csv",)
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


@dataclass(frozen=True)
class Record:
    """One input row of a batch file: the features, plus an optional caller ``id`` and true ``label``."""

    features: tuple[float, ...]
    label: int | None = None
    id: str | int | None = None


def validate_features(value: Any, where: str) -> tuple[float, ...]:
    """One instance: a list of exactly 64 finite numbers (bools rejected: JSON ``true`` is not a pixel)."""
    if not isinstance(value, list | tuple):
        raise ValidationError(where, f"expected a list of {N_FEATURES} numbers, got {type(value).__name__}")
    if len(value) != N_FEATURES:
        raise ValidationError(where, f"expected {N_FEATURES} numbers, got {len(value)}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValidationError(where, f"expected finite numbers, got {v!r}")
        out.append(float(v))
    return tuple(out)


def validate_instances(payload: Any, max_instances: int) -> list[tuple[float, ...]]:
    """The body of ``POST /predict``: ``{"instances": [[64 numbers], ...]}`` with 1..max_instances rows."""
    if not isinstance(payload, dict) or "instances" not in payload:
        raise ValidationError("instances", 'body must be a JSON object {"instances": [[64 numbers], ...]}')
    instances = payload["instances"]
    if not isinstance(instances, list) or not instances:
        raise ValidationError("instances", "must be a non-empty list")
    if len(instances) > max_instances:
        raise ValidationError("instances", f"at most {max_instances} per request, got {len(instances)}")
    return [validate_features(row, f"instances[{i}]") for i, row in enumerate(instances)]


def _optional_label(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValidationError(where, f"label must be an integer, got {value!r}")
    if not 0 <= int(value) < N_CLASSES:
        raise ValidationError(where, f"label must be in 0..{N_CLASSES - 1}, got {value!r}")
    return int(value)


def parse_csv(text: str, source: str) -> list[Record]:
    """CSV rows of 64 features, or 65 with the label last (the digits.csv format). An optional header row
    (first cell not a number) and blank lines are skipped."""
    records: list[Record] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        cells = [c.strip() for c in line.split(",")]
        if not line.strip():
            continue
        try:
            numbers = [float(c) for c in cells]
        except ValueError as exc:
            if lineno == 1 and not records:
                continue  # header
            raise ValidationError(f"{source}:{lineno}", f"not a number ({exc})") from exc
        where = f"{source}:{lineno}"
        if len(numbers) not in (N_FEATURES, N_FEATURES + 1):
            raise ValidationError(
                where, f"expected {N_FEATURES} or {N_FEATURES + 1} columns, got {len(numbers)}"
            )
        label = _optional_label(numbers[N_FEATURES], where) if len(numbers) > N_FEATURES else None
        records.append(Record(validate_features(numbers[:N_FEATURES], where), label=label))
    return records


def parse_jsonl(text: str, source: str) -> list[Record]:
    """JSON lines, each either ``[64 numbers]`` or ``{"features": [...], "label": 3, "id": "abc"}``."""
    records: list[Record] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(where, f"invalid JSON ({exc.msg})") from exc
        if isinstance(obj, dict):
            record_id = obj.get("id")
            if record_id is not None and not isinstance(record_id, str | int):
                raise ValidationError(where, "id must be a string or an integer")
            features = validate_features(obj.get("features"), where)
            records.append(Record(features, _optional_label(obj.get("label"), where), record_id))
        else:
            records.append(Record(validate_features(obj, where)))
    return records


def is_batch_file(name: str) -> bool:
    """Whether ``batch_predict`` reads this file (by suffix); anything else under the prefix is skipped."""
    return name.lower().endswith(CSV_SUFFIXES + JSONL_SUFFIXES)


def parse_batch_file(name: str, data: bytes) -> list[Record]:
    """Parse a batch file by its suffix (CSV or JSON lines); the caller checked :func:`is_batch_file`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(name, f"not UTF-8 text ({exc})") from exc
    if name.lower().endswith(CSV_SUFFIXES):
        return parse_csv(text, name)
    if name.lower().endswith(JSONL_SUFFIXES):
        return parse_jsonl(text, name)
    raise ValidationError(name, f"not a batch file (want {', '.join(CSV_SUFFIXES + JSONL_SUFFIXES)})")


def part_name(input_name: str) -> str:
    """``batch-000.csv`` -> ``batch-000``: the ``<part>`` in ``predictions-<part>.jsonl``, names its input."""
    return input_name.rsplit(".", 1)[0] if "." in input_name else input_name


def prediction_lines(source: str, records: Sequence[Record], predictions: Sequence[int]) -> bytes:
    """JSON lines ``{"source", "row", "prediction"[, "id"][, "label"]}``, one per input row, in order."""
    lines = []
    for row, (record, pred) in enumerate(zip(records, predictions, strict=True)):
        item: dict[str, Any] = {"source": source, "row": row, "prediction": int(pred)}
        if record.id is not None:
            item["id"] = record.id
        if record.label is not None:
            item["label"] = record.label
        lines.append(json.dumps(item, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode("utf-8")
