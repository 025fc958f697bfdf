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
    }
