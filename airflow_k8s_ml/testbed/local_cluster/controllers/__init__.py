"""Controllers of the local cluster: each reconciles one kind from the store, like kube-controller-manager.

One subpackage per kind (``job``, ``cronjob``, ``deployment`` with ReplicaSets and ``/scale``, ``service``
with Endpoints and the proxy, ``hpa``, ``pytorchjob``), each registering its own admission, subresources
and deletion rules with the cluster when attached; shared here: the reconcile loop (:mod:`.base`), the
start order (:mod:`.registry`), the garbage collector and owner references (:mod:`.garbage`,
:mod:`.ownership`), and the small single-module kinds (namespaces, ConfigMaps/Secrets, PodDisruptionBudgets).
"""
