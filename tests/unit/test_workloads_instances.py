"""Prediction-input validation and batch-file parsing shared by serve and batch_predict (pure)."""

from __future__ import annotations

import json

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.workloads.dataset import load_digits, train_val
from airflow_k8s_ml.workloads.instances import (
    Record,
    is_batch_file,
    parse_batch_file,
    parse_csv,
    parse_jsonl,
    part_name,
    prediction_lines,
    validate_instances,
)
from airflow_k8s_ml.workloads.seed import batch_files

ROW = [float(i % 17) for i in range(64)]


def test_valid_instances() -> None:
    rows = validate_instances({"instances": [ROW, [0] * 64]}, max_instances=10)
    assert rows == [tuple(ROW), (0.0,) * 64]


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        ([ROW], "instances", "JSON object"),
        ({"rows": [ROW]}, "instances", "JSON object"),
        ({"instances": []}, "instances", "non-empty"),
        ({"instances": [ROW[:63]]}, "instances[0]", "expected 64 numbers, got 63"),
        ({"instances": [ROW, "abc"]}, "instances[1]", "got str"),
        ({"instances": [[*ROW[:63], True]]}, "instances[0]", "finite numbers"),
        ({"instances": [[*ROW[:63], float("nan")]]}, "instances[0]", "finite numbers"),
        ({"instances": [ROW] * 3}, "instances", "at most 2"),
    ],
)
def test_invalid_instances(payload: object, field: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        validate_instances(payload, max_instances=2)
    assert info.value.field == field


def test_csv_with_and_without_labels_and_header() -> None:
    header = ",".join(f"p{i}" for i in range(64))
    text = f"{header}\n{','.join(map(str, ROW))}\n\n{','.join(map(str, ROW))},7\n"
    records = parse_csv(text, "b.csv")
    assert records == [Record(tuple(ROW)), Record(tuple(ROW), label=7)]


def test_csv_errors_name_the_line() -> None:
    with pytest.raises(ValidationError, match=r"b\.csv:2") as info:
        parse_csv(f"{','.join(map(str, ROW))}\n1,2,3\n", "b.csv")
    assert "columns" in str(info.value)
    with pytest.raises(ValidationError, match=r"label must be in 0\.\.9"):
        parse_csv(",".join(map(str, ROW)) + ",10\n", "b.csv")


def test_jsonl_lists_and_objects() -> None:
    text = json.dumps(ROW) + "\n" + json.dumps({"id": "a", "features": ROW, "label": 3}) + "\n"
    assert parse_jsonl(text, "b.jsonl") == [Record(tuple(ROW)), Record(tuple(ROW), label=3, id="a")]
    with pytest.raises(ValidationError, match=r"b\.jsonl:1"):
        parse_jsonl("{not json}\n", "b.jsonl")
    with pytest.raises(ValidationError, match="id must be"):
        parse_jsonl(json.dumps({"id": [1], "features": ROW}), "b.jsonl")


def test_batch_file_selection_by_suffix() -> None:
    assert [
        n for n in ("a.csv", "b.JSONL", "c.ndjson", "d.json", "e.txt", "f.parquet") if is_batch_file(n)
    ] == [
        "a.csv",
        "b.JSONL",
        "c.ndjson",
        "d.json",
    ]
    with pytest.raises(ValidationError, match="not a batch file"):
        parse_batch_file("e.txt", b"")
    with pytest.raises(ValidationError, match="UTF-8"):
        parse_batch_file("a.csv", b"\xff\xfe")


def test_part_names_and_prediction_lines() -> None:
    assert part_name("batch-000.csv") == "batch-000"
    assert part_name("noext") == "noext"
    records = [Record(tuple(ROW), label=1, id="x"), Record(tuple(ROW))]
    lines = [json.loads(line) for line in prediction_lines("b.jsonl", records, [1, 4]).decode().splitlines()]
    assert lines == [
        {"source": "b.jsonl", "row": 0, "prediction": 1, "id": "x", "label": 1},
        {"source": "b.jsonl", "row": 1, "prediction": 4},
    ]


def test_seeded_batch_files_parse_back_to_held_out_rows() -> None:
    _, held_out = train_val(load_digits())
    files = batch_files(held_out, batches=3, rows_per_batch=5)
    assert list(files) == ["batch-000.csv", "batch-001.jsonl", "batch-002.csv"]
    parsed = [r for name, data in files.items() for r in parse_batch_file(name, data)]
    assert [r.features for r in parsed] == list(held_out.features[:15])
    assert [r.label for r in parsed] == list(held_out.labels[:15])
    assert parsed[5].id == "batch-001-0000"
    with pytest.raises(ValidationError, match="exceed"):
        batch_files(held_out, batches=2, rows_per_batch=len(held_out))
