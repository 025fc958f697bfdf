"""kueue.x-k8s.io served natively (v1beta2 stored, v1beta1 converted): queues, quota, Workloads and admission
of queued jobs."""
