"""Controllers of the local cluster: each reconciles one kind from the store, like kube-controller-manager."""
