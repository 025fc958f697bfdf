"""kubeflow.org/v1 TFJob as training-operator release-1.9 runs it, on the common job logic of
``..pytorchjob``."""
