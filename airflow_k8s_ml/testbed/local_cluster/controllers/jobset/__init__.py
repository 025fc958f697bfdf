"""jobset.x-k8s.io/v1alpha2 JobSet (kubernetes-sigs/jobset): webhook, child Jobs, headless Service, policies,
status."""
