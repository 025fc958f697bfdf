"""airflow-k8s-ml: run ML fine-tuning, checkpoint gates and inference on Kubernetes from Apache Airflow.

Importing this package is cheap on purpose: DAG files import it at parse time, so nothing here pulls in
``kubernetes``, ``boto3`` or ``torch``. Operators live in :mod:`airflow_k8s_ml.operators`.
"""

from __future__ import annotations

__version__ = "0.1.0"
