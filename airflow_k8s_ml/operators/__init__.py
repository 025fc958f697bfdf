"""Airflow operators of airflow-k8s-ml (import-light: heavy clients are imported inside execute/run)."""
