"""Extra links of our operators: the approved checkpoint, the deployed service, a cluster dashboard.

How Airflow 3.3 shows them: after every run of a task - success, failure, and each deferral - the worker
calls ``get_link`` and stores the URL in XCom (``_link_<ClassName>``); the UI reads that XCom. So
``get_link`` runs in the worker, next to the operator object, and an empty string hides the button.

Import-light: imported with the operators at DAG parse time; XCom, the configuration and the Kubernetes
client are imported inside ``get_link``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

__all__ = [
    "ApprovedCheckpointLink",
    "ClusterDashboardLink",
    "InferenceServiceLink",
    "dashboard_url",
    "service_url",
]


def _result(ti_key: TaskInstanceKey) -> Any:
    from airflow.sdk.execution_time.xcom import XCom

    return XCom.get_value(ti_key=ti_key, key="return_value")


def dashboard_url(template: str, workload: Mapping[str, Any]) -> str:
    """The template with ``{namespace}``, ``{name}``, ``{kind}``, ``{uid}`` URL-quoted; "" without a name.

    Unknown placeholders are left as they are rather than failing the task's finalisation.
    """
    if not template or not workload.get("name"):
        return ""
    values = {
        key: quote(str(workload.get(key) or ""), safe="") for key in ("namespace", "name", "kind", "uid")
    }

    class _Keep(dict[str, str]):
        def __missing__(self, key: str) -> str:
            return "{" + key + "}"

    return template.format_map(_Keep(values))


class ClusterDashboardLink(BaseOperatorLink):
    """A training workload in the cluster dashboard or log system of ``[airflow_k8s_ml]
    dashboard_url_template`` (hidden when the option is empty)."""

    name = "Cluster dashboard"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow_k8s_ml import config

        template = config.get("dashboard_url_template").strip()
        if not template:
            return ""
        record = getattr(operator, "_record", None)
        workload = record.identity() if record is not None else _result(ti_key)
        return dashboard_url(template, workload) if isinstance(workload, Mapping) else ""


class ApprovedCheckpointLink(BaseOperatorLink):
    """The checkpoint a CheckpointCheckOperator approved, on the plugin's approved-checkpoint page."""

    name = "Approved checkpoint"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        approved = _result(ti_key)
        if not isinstance(approved, Mapping) or not approved.get("uri"):
            return ""
        from airflow_k8s_ml.plugin_paths import checkpoint_path

        return checkpoint_path(ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)


class InferenceServiceLink(BaseOperatorLink):
    """The deployed Service through the Kubernetes API server's service proxy.

    The base is ``[airflow_k8s_ml] service_proxy_url`` when set (``kubectl proxy``'s
    ``http://127.0.0.1:8001``, or an authenticating gateway in front of the API server), else the API server
    of the task's ``kubernetes_conn_id``.
    """

    name = "Inference service"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        deployed = _result(ti_key)
        if not isinstance(deployed, Mapping) or not deployed.get("service_url"):
            return ""
        from airflow_k8s_ml import config

        base = config.get("service_proxy_url").strip()
        if not base:
            base = _api_server(getattr(operator, "kubernetes_conn_id", None))
        return service_url(base, deployed)


def service_url(base: str, deployed: Mapping[str, Any]) -> str:
    """The deploy XCom's ``service_url`` (an API-server proxy path) under ``base``; "" without either."""
    path = deployed.get("service_url")
    if not base or not isinstance(path, str) or not path.startswith("/"):
        return ""
    return f"{base.rstrip('/')}{path}"


def _api_server(conn_id: str | None) -> str:
    """The API server URL of a Kubernetes connection ("" when it cannot be resolved)."""
    if not conn_id:
        return ""
    from airflow_k8s_ml.kube.sync_client import KubeClient

    client = KubeClient(conn_id)
    try:
        return str(client.api_client.configuration.host or "")
    finally:
        client.close()
