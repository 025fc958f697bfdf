"""Pods as local processes: the scheduler, the kubelet and the pieces they share.

One node (``settings.node_name``) whose capacity comes from the settings. The :class:`~.scheduler.Scheduler`
binds pods that fit, the :class:`~.kubelet.Kubelet` runs each bound pod's containers as process groups on
this machine and reports their status exactly as a real kubelet would, and the
:class:`~.claims.ClaimBinder` binds PersistentVolumeClaims to a directory under the state dir.
Modules are split by job: pure rules (``defaults``, ``validation``, ``fit``, ``status``, ``envvars``,
``mounts``) apart from the I/O shells (``runtime``, ``logfile``, ``volumes``, ``probes``, ``worker``).
"""
