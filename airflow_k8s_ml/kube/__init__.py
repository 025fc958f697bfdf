"""The only place that talks to a cluster.

- :mod:`.resources` (pure): kind -> REST path, the label that finds a workload's pods, replica names;
- :mod:`.errors`, :mod:`.retry`, :mod:`.events` (pure): HTTP answers -> :class:`~.errors.ApiError`, which
  failures to retry and how long to wait, Warning events as one line each;
- :mod:`.sync_client`: :class:`~.sync_client.KubeClient` for operators (on the cncf ``KubernetesHook``);
- :mod:`.async_client`: one long-lived ``kubernetes_asyncio`` client per connection id per process;
- :mod:`.watch`: one shared list+watch per (connection, resource, namespace), fanned out to triggers.

This ``__init__`` imports nothing, so ``import airflow_k8s_ml.kube.resources`` stays cheap.
"""
