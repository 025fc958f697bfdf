from __future__ import annotations

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.formats import (
    is_dns1035_label,
    is_label_value,
    validate_dns1035_label,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_label_key,
    validate_labels,
    validate_name,
)
from airflow_k8s_ml.manifests.naming import (
    GENERATED_NAME_MAX,
    RunKey,
    manual_job_name,
    object_meta,
    run_annotations,
    run_labels,
    sanitize_label_value,
    workload_name,
)


@pytest.mark.parametrize(
    ("validator", "value", "ok"),
    [
        (validate_dns1123_label, "train-1", True),
        (validate_dns1123_label, "1abc", True),
        (validate_dns1123_label, "a" * 63, True),
        (validate_dns1123_label, "a" * 64, False),
        (validate_dns1123_label, "Train", False),
        (validate_dns1123_label, "a.b", False),
        (validate_dns1123_label, "-a", False),
        (validate_dns1123_label, "a-", False),
        (validate_dns1123_label, "", False),
        (validate_dns1123_subdomain, "a.b-c.d", True),
        (validate_dns1123_subdomain, "a" * 253, True),
        (validate_dns1123_subdomain, "a" * 254, False),
        (validate_dns1123_subdomain, "a..b", False),
        (validate_dns1123_subdomain, "a_b", False),
        (validate_dns1035_label, "svc-1", True),
        (validate_dns1035_label, "1svc", False),
        (validate_dns1035_label, "svc.a", False),
        (validate_dns1035_label, "a" * 64, False),
    ],
)
def test_dns_validators(validator, value, ok):
    if ok:
        assert validator(value, "name") == value
    else:
        with pytest.raises(ValidationError) as info:
            validator(value, "name")
        assert info.value.field == "name"


@pytest.mark.parametrize(
    ("kind", "name", "ok"),
    [
        ("Job", "a" * 63, True),
        ("Job", "a" * 64, False),
        ("Job", "my.job", True),
        ("CronJob", "a" * 52, True),
        ("CronJob", "a" * 53, False),
        ("PyTorchJob", "pt-1", True),
        ("PyTorchJob", "pt.1", False),
        ("PyTorchJob", "1pt", False),
        ("Service", "9svc", False),
        ("Deployment", "a" * 100, True),
        ("Job", "Bad_Name", False),
        ("Job", None, False),
        ("Job", 42, False),
    ],
)
def test_validate_name_per_kind(kind, name, ok):
    if ok:
        assert validate_name(kind, name) == name
    else:
        with pytest.raises(ValidationError) as info:
            validate_name(kind, name, "job_name")
        assert info.value.field == "job_name"


def test_over_long_name_message_says_the_limit():
    with pytest.raises(ValidationError, match="must be no more than 52"):
        validate_name("CronJob", "c" * 60)


@pytest.mark.parametrize(
    "value",
    [
        "manual__2024-01-01T00:00:00+00:00",
        "scheduled__2024-06-30T23:59:59.123456+00:00",
        "x" * 200,
        "-leading-and-trailing-",
        "___",
        "über",
        "",
        "plain-valid.value_1",
        "a/b c",
    ],
)
def test_sanitize_label_value_is_valid_stable_and_idempotent(value):
    out = sanitize_label_value(value)
    assert is_label_value(out)
    assert len(out) <= 63
    assert sanitize_label_value(value) == out
    assert sanitize_label_value(out) == out
    if is_label_value(value):
        assert out == value


def test_sanitize_keeps_values_that_differ_only_in_replaced_chars_distinct():
    assert sanitize_label_value("run:00") != sanitize_label_value("run-00") == "run-00"
    assert sanitize_label_value("a" * 70) != sanitize_label_value("a" * 71)


def test_run_labels_and_annotations():
    labels = run_labels("nightly_finetune", "train.llama", "manual__2024-01-01T00:00:00+00:00", 3, 2)
    assert labels["app.kubernetes.io/managed-by"] == "airflow-k8s-ml"
    assert labels["airflow-k8s-ml/dag-id"] == "nightly_finetune"
    assert labels["airflow-k8s-ml/task-id"] == "train.llama"
    assert labels["airflow-k8s-ml/run-id"].startswith("manual__2024-01-01T00-00-00-00-00-")
    assert labels["airflow-k8s-ml/map-index"] == "3"
    assert labels["airflow-k8s-ml/attempt"] == "2"
    assert all(is_label_value(v) for v in labels.values())
    validate_labels(labels)
    annotations = run_annotations(
        "nightly_finetune", "train.llama", "manual__2024-01-01T00:00:00+00:00", 3, 2
    )
    assert annotations["airflow-k8s-ml/run-id"] == "manual__2024-01-01T00:00:00+00:00"
    assert annotations["airflow-k8s-ml/map-index"] == "3"
    assert annotations["airflow-k8s-ml/attempt"] == "2"


def test_unmapped_map_index_label_is_valid():
    labels = run_labels("d", "t", "r")
    assert labels["airflow-k8s-ml/map-index"] == "none"
    assert run_annotations("d", "t", "r")["airflow-k8s-ml/map-index"] == "-1"


def test_selector_excludes_attempt_so_retries_find_earlier_attempts():
    key = RunKey("d", "t", "r", attempt=1)
    assert key.label_selector() == key.next_attempt().label_selector()
    assert "airflow-k8s-ml/attempt" not in key.label_selector()
    assert key.label_selector(include_attempt=True).endswith("airflow-k8s-ml/attempt=1")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dag_id": ""}, "dag_id"),
        ({"task_id": None}, "task_id"),
        ({"run_id": "  "}, "run_id"),
        ({"map_index": -2}, "map_index"),
        ({"attempt": 0}, "attempt"),
        ({"attempt": True}, "attempt"),
    ],
)
def test_run_key_rejects_bad_identity(kwargs, field):
    base = {"dag_id": "d", "task_id": "t", "run_id": "r"}
    with pytest.raises(ValidationError) as info:
        RunKey(**{**base, **kwargs})
    assert info.value.field == field


@pytest.mark.parametrize("kind", ["Job", "PyTorchJob", "CronJob"])
@pytest.mark.parametrize(
    ("dag_id", "task_id"),
    [
        ("nightly_finetune", "train"),
        ("A" * 200, "B" * 200),
        ("2024_report", "7"),
        ("___", "..."),
        ("dag", "group.sub_task"),
    ],
)
def test_workload_names_are_dns1035_within_limits_and_deterministic(kind, dag_id, task_id):
    name = workload_name(dag_id, task_id, "manual__2024-01-01T00:00:00+00:00", kind=kind)
    assert is_dns1035_label(name)
    assert len(name) <= GENERATED_NAME_MAX[kind]
    assert name == workload_name(dag_id, task_id, "manual__2024-01-01T00:00:00+00:00", kind=kind)
    validate_name(kind, name)


def test_workload_name_shape_and_uniqueness():
    key = RunKey("nightly_finetune", "train", "manual__1", map_index=-1, attempt=1)
    name = key.workload_name()
    assert name.startswith("nightly-finetune-train-")
    assert name.endswith("-a1")
    assert key.next_attempt().workload_name().endswith("-a2")
    # attempts share the identity hash, other task instances do not
    assert key.identity_digest() in key.next_attempt().workload_name()
    others = {
        RunKey("nightly_finetune", "train", "manual__2").workload_name(),
        RunKey("nightly_finetune", "train", "manual__1", map_index=0).workload_name(),
        RunKey("nightly_finetune", "train", "manual__1", map_index=1).workload_name(),
        RunKey("nightly_finetune", "train2", "manual__1").workload_name(),
    }
    assert name not in others and len(others) == 4


def test_manual_job_name():
    key = RunKey("d", "t", "r")
    name = manual_job_name("c" * 52, key)
    assert len(name) <= 57
    assert "-manual-" in name
    validate_name("Job", name)
    assert name == manual_job_name("c" * 52, key)
    assert name != manual_job_name("c" * 52, key.next_attempt())
    with pytest.raises(ValidationError) as info:
        manual_job_name("c" * 53, key)
    assert info.value.field == "cronjob_name"


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("nvidia.com/gpu.product", True),
        ("a/b/c", False),
        ("Bad_Prefix/x", False),
        ("/x", False),
        ("x" * 64, False),
        ("", False),
    ],
)
def test_label_keys(key, ok):
    if ok:
        validate_label_key(key, "labels")
    else:
        with pytest.raises(ValidationError):
            validate_label_key(key, "labels")


def test_labels_reject_bad_values_naming_the_key():
    with pytest.raises(ValidationError) as info:
        validate_labels({"team": "ml platform"}, "labels")
    assert info.value.field == "labels[team]"


def test_object_meta():
    meta = object_meta("Job", "j", "ml", {"a": "b"}, {})
    assert meta == {"name": "j", "namespace": "ml", "labels": {"a": "b"}}
    with pytest.raises(ValidationError) as info:
        object_meta("Job", "j", "Bad_NS")
    assert info.value.field == "namespace"
