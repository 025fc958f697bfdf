"""The canary's pure parts: its settings (bad input named), its share of the pods, the MetricValueList reader,
the window's counts from two reads of the counters, and the one verdict."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.serving import build_canary, canary_selector
from airflow_k8s_ml.manifests.serving_rules import check_canary_fields
from airflow_k8s_ml.status.canary import (
    CanarySettings,
    Counts,
    canary_replicas,
    judge,
    metric_values,
    window_counts,
)

SETTINGS = CanarySettings(percent=20, analysis_seconds=60, max_error_rate=0.01, min_requests=50)


def test_settings_take_defaults_and_templated_numbers() -> None:
    read = check_canary_fields({"percent": "20", "analysis_seconds": "30"})
    assert read == {"percent": 20, "analysis_seconds": 30.0, "max_error_rate": 0.01, "min_requests": 50}
    assert CanarySettings(**read) == CanarySettings(20, 30.0, 0.01, 50)
    assert check_canary_fields(None) is None
    assert check_canary_fields({"percent": 0}) is None  # a Param's "off"
    assert check_canary_fields({"percent": "0", "analysis_seconds": 5}) is None


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ({"percent": 100}, "canary.percent", "1..99"),
        ({"percent": -5}, "canary.percent", "1..99"),
        ({"percent": 12.5}, "canary.percent", "whole number"),
        ({"percent": True}, "canary.percent", "number"),
        ({"analysis_seconds": 60}, "canary.percent", "required"),
        ({"percent": 20, "analysis_seconds": 0}, "canary.analysis_seconds", "> 0"),
        ({"percent": 20, "max_error_rate": 1.5}, "canary.max_error_rate", "[0, 1)"),
        ({"percent": 20, "min_requests": 0}, "canary.min_requests", ">= 1"),
        ({"percent": 20, "window": 60}, "canary.window", "unknown key"),
        ({"percent": "twenty"}, "canary.percent", "number"),
        ([20], "canary", "mapping"),
    ],
)
def test_bad_settings_name_the_key(value: Any, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        check_canary_fields(value)
    assert info.value.field == field
    assert words in info.value.message


@pytest.mark.parametrize(
    ("stable", "percent", "canary"), [(2, 20, 1), (4, 50, 4), (8, 20, 2), (1, 99, 99), (3, 1, 1)]
)
def test_canary_pods_are_about_the_percent_of_all_ready_pods(stable: int, percent: int, canary: int) -> None:
    assert canary_replicas(stable, percent) == canary


def test_metric_values_read_a_metric_value_list_with_quantities() -> None:
    body = {
        "kind": "MetricValueList",
        "apiVersion": "custom.metrics.k8s.io/v1beta2",
        "items": [
            {"describedObject": {"kind": "Pod", "name": "a"}, "metric": {"name": "x"}, "value": "120"},
            {"describedObject": {"kind": "Pod", "name": "b"}, "metric": {"name": "x"}, "value": "1500m"},
            {"describedObject": {"kind": "Pod", "name": "c"}, "value": "nonsense"},
            {"describedObject": {}, "value": "3"},
        ],
    }
    assert metric_values(body) == {"a": 120.0, "b": 1.5}
    assert metric_values({}) == {}


def test_window_counts_are_counter_increases_with_resets_and_new_pods_from_zero() -> None:
    baseline = {"requests": {"a": 100, "b": 40}, "errors": {"a": 2, "b": 0}}
    now = {"requests": {"a": 130, "b": 5, "c": 7}, "errors": {"a": 3, "b": 1, "c": 0}}
    # a: +30 requests +1 error; b restarted: 5 and 1 from zero; c is new: 7 and 0
    assert window_counts(baseline, now) == Counts(requests=42, errors=2, pods=3)
    # errors made between the two reads at the start: never more errors than requests
    skewed = window_counts(
        {"requests": {"a": 10}, "errors": {"a": 0}}, {"requests": {"a": 12}, "errors": {"a": 3}}
    )
    assert skewed == Counts(requests=2, errors=2, pods=1)


def test_the_verdict() -> None:
    good, bad, thin = Counts(200, 1, 1), Counts(60, 6, 1), Counts(10, 0, 1)
    assert judge(SETTINGS, good, 10).action == "wait"
    assert judge(SETTINGS, good, 60).action == "promote"
    early = judge(SETTINGS, bad, 10)  # enough traffic, over the limit: no need to wait for the window
    assert early.action == "rollback"
    assert "6 errors in 60 requests (error rate 10.00%) over max_error_rate 1.00%" in early.reason
    assert early.rejected  # the model's own errors: final, a retry would not run it again
    assert judge(SETTINGS, Counts(20, 10, 1), 10).action == "wait"  # under min_requests: not yet judged
    starved = judge(SETTINGS, thin, 61)
    assert starved.action == "rollback"
    assert starved.reason == "not enough traffic to judge: 10 requests in 60s, min_requests 50"
    assert not starved.rejected  # says nothing of the model: a retry may judge it
    assert judge(SETTINGS, good, 60).to_dict() == {
        "decision": "promote",
        "reason": "1 errors in 200 requests (error rate 0.50%) within max_error_rate 1.00%",
        "rejected": False,
        "requests": 200,
        "errors": 1,
        "error_rate": 0.005,
        "pods": 1,
    }


def test_build_canary_keeps_the_template_and_adds_its_own_selector() -> None:
    stable = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "digits", "namespace": "ml", "labels": {"app": "x"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"airflow-k8s-ml/inference": "digits"}},
            "template": {
                "metadata": {"labels": {"airflow-k8s-ml/inference": "digits"}, "annotations": {"a": "1"}},
                "spec": {"containers": [{"name": "server", "image": "py"}]},
            },
        },
    }
    canary = build_canary(stable, 1)
    assert canary["metadata"]["name"] == "digits-canary"
    assert canary["spec"]["replicas"] == 1
    assert canary["spec"]["selector"] == {"matchLabels": canary_selector("digits")}
    labels = canary["spec"]["template"]["metadata"]["labels"]
    assert labels == {"airflow-k8s-ml/inference": "digits", "airflow-k8s-ml/canary": "digits"}
    assert canary["spec"]["template"]["spec"] == stable["spec"]["template"]["spec"]
    assert stable["metadata"]["name"] == "digits"  # the stable one is not changed


def test_the_metrics_plan_asks_the_custom_metrics_api_for_the_canary_pods() -> None:
    from airflow_k8s_ml.kube.custom_metrics import counters

    plan = counters("ml", canary_selector("digits"))
    first = next(plan)  # errors first: the requests read after them include every error read
    assert (first.method, first.path) == (
        "GET",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ml/pods/*/http_request_errors_total",
    )
    assert first.query == (("labelSelector", "airflow-k8s-ml/inference=digits,airflow-k8s-ml/canary=digits"),)
    item = {"describedObject": {"name": "p"}, "value": "2"}
    second = plan.send({"items": [item]})
    assert second.path.endswith("/pods/*/http_requests_total")
    with pytest.raises(StopIteration) as done:
        plan.send({"items": [{**item, "value": "40"}]})
    assert done.value.value == {"requests": {"p": 40.0}, "errors": {"p": 2.0}}


def test_a_missing_custom_metrics_api_says_what_the_cluster_needs() -> None:
    from airflow_k8s_ml.errors import ApiError
    from airflow_k8s_ml.kube.custom_metrics import pods_metric

    plan = pods_metric("ml", "http_requests_total", {"a": "b"})
    next(plan)
    with pytest.raises(ApiError) as info:
        plan.throw(ApiError(404, "NotFound", "the server could not find the requested resource"))
    assert "does not serve the pods metric 'http_requests_total' in ml" in str(info.value)
    assert "Prometheus adapter" in str(info.value)


def test_the_canary_trigger_survives_serialization() -> None:
    from airflow_k8s_ml.triggers.canary import CanaryTrigger

    trigger = CanaryTrigger(
        name="digits-canary",
        namespace="ml",
        uid="u-1",
        selector=canary_selector("digits"),
        canary=SETTINGS.to_dict(),
        baseline={"requests": {"p": 3.0}, "errors": {"p": 0.0}},
        started_at=1_700_000_000.5,
        kubernetes_conn_id="k8s",
        poll_interval=2.0,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_k8s_ml.triggers.canary.CanaryTrigger"
    assert CanaryTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert CanarySettings(**kwargs["canary"]) == SETTINGS
