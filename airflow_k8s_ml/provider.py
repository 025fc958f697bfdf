"""Airflow provider metadata, found through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    """Describe the package to Airflow's ProvidersManager (name, versions, connection types)."""
    from airflow_k8s_ml import __version__

    return {
        "package-name": "airflow-k8s-ml",
        "name": "Airflow K8s ML",
        "description": "Fine-tune, gate, deploy and batch-serve ML models on Kubernetes.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Airflow K8s ML",
                "external-doc-url": "https://example.invalid/airflow-k8s-ml",
                "tags": ["software"],
            }
        ],
        "config": {
            "airflow_k8s_ml": {
                "description": "Waiting for workloads in the triggerer.\n",
                "options": {
                    "api_unreachable_timeout": {
                        "description": "Seconds a deferred wait tolerates an unreachable Kubernetes API "
                        "server (no connection, or 502/503/504) before it fails naming the endpoint and the "
                        "last error; the retry adopts the workload if it still runs.\n",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "300",
                        "default": "900",
                    }
                },
            }
        },
    }
