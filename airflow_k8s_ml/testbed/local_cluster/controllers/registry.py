"""The controllers a local cluster runs, in start order, as ``module:Class`` paths relative to this
package's parent (so a controller is only imported when a cluster starts)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..services import ClusterServices
    from .base import Controller

CONTROLLER_PATHS: list[str] = [
    "controllers.garbage:GarbageCollector",
    "controllers.namespace:NamespaceLifecycle",
    "controllers.config_admission:ConfigAdmission",
    "kubelet.scheduler:Scheduler",
    "kubelet.kubelet:Kubelet",
    "kubelet.claims:ClaimBinder",
    "controllers.job.controller:JobController",
    "controllers.job.ttl:TTLAfterFinishedController",
    "controllers.cronjob.controller:CronJobController",
    "controllers.pytorchjob.controller:PyTorchJobController",
    "controllers.tfjob.controller:TFJobController",
    "controllers.trainjob.controller:TrainJobController",
    "controllers.jobset.controller:JobSetController",
    "controllers.kueue.controller:KueueController",
    "controllers.deployment.controller:DeploymentController",
    "controllers.deployment.replicaset:ReplicaSetController",
    "controllers.service.controller:ServiceController",
    "controllers.metrics.apis:MetricsAPIs",
    "controllers.hpa.controller:HPAController",
    "controllers.pdb:DisruptionController",
]


def _load(path: str) -> Callable[[ClusterServices], Controller]:
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(f"airflow_k8s_ml.testbed.local_cluster.{module}"), cls)  # type: ignore[no-any-return]


def controllers() -> list[Callable[[ClusterServices], Controller]]:
    return [_load(p) for p in CONTROLLER_PATHS]
