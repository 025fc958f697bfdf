"""The cluster's metrics APIs: ``metrics.k8s.io`` (what metrics-server serves, from the kubelet's cgroup
readings) and ``custom.metrics.k8s.io`` (what a Prometheus adapter serves, from the service proxy's
request counts)."""
