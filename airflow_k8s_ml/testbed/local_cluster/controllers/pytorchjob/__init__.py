"""kubeflow.org/v1 PyTorchJob: the training operator's API defaults, webhook, pods/services, status, sync."""
