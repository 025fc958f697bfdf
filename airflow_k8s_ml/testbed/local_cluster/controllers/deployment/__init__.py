"""apps/v1 Deployment and the ReplicaSets it owns: admission, rollout sync (replicas, revisions, template,
status), the ReplicaSet controller and its pods, and the ``/scale`` subresource both serve."""
