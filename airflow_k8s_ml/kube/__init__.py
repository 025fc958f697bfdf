"""The only place that talks to a cluster.

- :mod:`.resources` (pure): kind -> REST path, and which label finds a workload's pods;
- :mod:`.errors` (pure): one mapping from an HTTP answer to :class:`~.errors.ApiError`;
- :mod:`.sync_client`: :class:`~.sync_client.KubeClient` for operators (on the cncf ``KubernetesHook``);
- :mod:`.async_client`: one long-lived ``kubernetes_asyncio`` client per connection id per process;
- :mod:`.watch`: one shared list+watch per (connection, resource, namespace), fanned out to triggers.

This ``__init__`` imports nothing, so ``import airflow_k8s_ml.kube.resources`` stays cheap.
"""
