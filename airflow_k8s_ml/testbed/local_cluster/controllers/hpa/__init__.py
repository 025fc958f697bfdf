"""autoscaling HorizontalPodAutoscaler (v2, and v1 by conversion): admission, metrics, scaling rules and
the controller."""
