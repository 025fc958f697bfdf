"""kueue.x-k8s.io/v1beta1 served natively: queues, quota, Workloads and admission of queued jobs."""
