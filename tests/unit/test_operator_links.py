"""The extra links' URL rules (pure): the dashboard template and the service proxy URL. The links' full path -
computed in the worker, stored in XCom, served by the api-server - is covered in
tests/integration/test_ui_api_server.py."""

from __future__ import annotations

from airflow_k8s_ml.operators import CheckpointCheckOperator, FineTuneJobOperator, InferenceDeploymentOperator
from airflow_k8s_ml.operators.links import (
    ApprovedCheckpointLink,
    ClusterDashboardLink,
    InferenceServiceLink,
    dashboard_url,
    service_url,
)
from airflow_k8s_ml.plugin_paths import checkpoint_path

WORKLOAD = {"kind": "PyTorchJob", "name": "nightly-ft-1a2b-1", "namespace": "ml team", "uid": "u/1"}


def test_dashboard_template_gets_the_workload_url_quoted() -> None:
    template = "https://grafana.example/d/k8s?var-ns={namespace}&var-w={name}&kind={kind}&uid={uid}"
    assert dashboard_url(template, WORKLOAD) == (
        "https://grafana.example/d/k8s?var-ns=ml%20team&var-w=nightly-ft-1a2b-1&kind=PyTorchJob&uid=u%2F1"
    )


def test_dashboard_link_is_hidden_without_template_or_workload_and_keeps_unknown_placeholders() -> None:
    assert dashboard_url("", WORKLOAD) == ""
    assert dashboard_url("https://logs.example/{name}", {"namespace": "ml"}) == ""
    assert dashboard_url("https://logs.example/{name}?q={query}", WORKLOAD) == (
        "https://logs.example/nightly-ft-1a2b-1?q={query}"
    )


def test_service_url_is_the_proxy_path_under_the_api_server() -> None:
    deployed = {"service_url": "/api/v1/namespaces/ml/services/digits:http/proxy/"}
    assert service_url("https://10.0.0.1:6443/", deployed) == (
        "https://10.0.0.1:6443/api/v1/namespaces/ml/services/digits:http/proxy/"
    )
    assert service_url("", deployed) == "" and service_url("http://127.0.0.1:8001", {}) == ""


def test_approved_checkpoint_page_path_addresses_the_gate_task_instance() -> None:
    assert checkpoint_path("nightly", "manual__2026-01-01T00:00:00+00:00", "checkpoint_gate") == (
        "/airflow-k8s-ml/checkpoint?dag_id=nightly&run_id=manual__2026-01-01T00%3A00%3A00%2B00%3A00"
        "&task_id=checkpoint_gate&map_index=-1"
    )


def test_each_operator_declares_its_link() -> None:
    def names(cls: type) -> list[str]:
        return [type(link).__name__ for link in cls.operator_extra_links]  # type: ignore[attr-defined]

    assert names(FineTuneJobOperator) == [ClusterDashboardLink.__name__]
    assert names(CheckpointCheckOperator) == [ApprovedCheckpointLink.__name__]
    assert names(InferenceDeploymentOperator) == [InferenceServiceLink.__name__]
