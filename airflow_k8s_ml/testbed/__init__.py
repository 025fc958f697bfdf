"""The test bed: what makes one machine a whole platform, apart from the provider.

The provider (operators, sensors, triggers, kube, manifests, status, checkpoints, ui and the shared core
``k8s``) is what goes on Airflow workers. This package is everything else the demo and the tests need: the
embedded Kubernetes-compatible cluster (``local_cluster``), the embedded S3 endpoint (``local_s3``), the real
Airflow components started as one stack (``airflow_stack``, ``airflow_rest``), and the ``demo`` and
``standalone`` tooling.

The provider never imports this package (an import-linter contract says so) and installing the provider
alone loads none of it; its own dependencies come with the ``local`` extra:
``pip install 'airflow-k8s-ml[local]'``.
"""
