"""The only place that talks to a cluster: a pure request layer under two thin clients.

Pure (no I/O):

- :mod:`.resources`: kind -> REST path, the label that finds a workload's pods, replica names;
- :mod:`.requests`: verb + resource + namespace/name + query + body -> :class:`~.requests.Request`; an answer
  (:class:`~.requests.Reply`) -> object or :class:`~airflow_k8s_ml.errors.ApiError`, decided once
  (:mod:`.errors` reads the ``Status`` body); every write asks for ``fieldValidation=Strict``;
- :mod:`.operations`: get, list (paged), apply, delete, pods of a workload, log tail, Warning events as
  plans of requests (generators), written once for both clients;
- :mod:`.conversation`, :mod:`.retry`: running a plan - which failures to retry, how long to wait, when to
  reload credentials (one policy, as data); :mod:`.events`: Warning events as one line each.

Shells that only send: :class:`~.sync_client.KubeClient` (operators, on the cncf ``KubernetesHook``) and
:class:`~.async_client.AsyncKube` (triggers, one ``kubernetes_asyncio`` client per connection per process),
with the same methods and arguments. :mod:`.watch`: one shared list+watch per (connection, resource,
namespace), fanned out to triggers. :mod:`.serving_ops`: the service proxy, ReplicaSets, validated
multi-object apply.

This ``__init__`` imports nothing, so ``import airflow_k8s_ml.kube.resources`` stays cheap.
"""
