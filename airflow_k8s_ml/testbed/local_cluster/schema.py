"""Field schemas for strict decoding, taken from the official client's generated models.

A real apiserver decodes JSON into Go structs: unknown fields vanish (``fieldValidation=Ignore``), are
reported in a ``Warning`` header (``Warn``, the default) or reject the request (``Strict``, what
``kubectl apply`` sends). The ``kubernetes`` client ships the same schema as generated model classes
(``openapi_types`` + ``attribute_map``), so we walk those instead of hand-copying the OpenAPI document.
Kinds the client does not know (kubeflow.org) register a small schema tree of their own.
"""

from __future__ import annotations

import functools
import re
from typing import Any

# Type expressions as the generated models write them: "V1PodSpec", "list[V1Container]", "dict[str, str]",
# "str", "object". A schema node is either a model class name, ("list", node), ("map", node), or a leaf.
Schema = Any
LEAF = "leaf"

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\[str, (.+)\]$")

KIND_MODELS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "Pod"): "V1Pod",
    ("v1", "Service"): "V1Service",
    ("v1", "Endpoints"): "V1Endpoints",
    ("discovery.k8s.io/v1", "EndpointSlice"): "V1EndpointSlice",
    ("v1", "Event"): "CoreV1Event",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "Node"): "V1Node",
    ("batch/v1", "Job"): "V1Job",
    ("batch/v1", "CronJob"): "V1CronJob",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "ReplicaSet"): "V1ReplicaSet",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2HorizontalPodAutoscaler",
    ("autoscaling/v1", "HorizontalPodAutoscaler"): "V1HorizontalPodAutoscaler",
    ("autoscaling/v1", "Scale"): "V1Scale",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("scheduling.k8s.io/v1", "PriorityClass"): "V1PriorityClass",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "V1SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "V1SelfSubjectRulesReview",
    ("v1", "DeleteOptions"): "V1DeleteOptions",
}

# Schema trees for kinds the client has no model for: dict field -> node, "*" for free-form maps.
CUSTOM_SCHEMAS: dict[tuple[str, str], Schema] = {}


# kubeflow.org/v1 PyTorchJob, field for field as training-operator v1 declares it (pkg/apis/kubeflow.org/v1:
# PyTorchJobSpec, ElasticPolicy, RunPolicy, SchedulingPolicy, ReplicaSpec, JobStatus), so that Strict
# refuses a typo there as the CRD's structural schema does on a real cluster.
_SCHEDULING_POLICY: Schema = {
    "minAvailable": LEAF,
    "queue": LEAF,
    "minResources": ("map", LEAF),
    "priorityClass": LEAF,
    "scheduleTimeoutSeconds": LEAF,
}
_RUN_POLICY: Schema = {
    "cleanPodPolicy": LEAF,
    "ttlSecondsAfterFinished": LEAF,
    "activeDeadlineSeconds": LEAF,
    "backoffLimit": LEAF,
    "suspend": LEAF,
    "managedBy": LEAF,
    "schedulingPolicy": _SCHEDULING_POLICY,
}
_ELASTIC_POLICY: Schema = {
    "minReplicas": LEAF,
    "maxReplicas": LEAF,
    "rdzvBackend": LEAF,
    "rdzvPort": LEAF,
    "rdzvHost": LEAF,
    "rdzvId": LEAF,
    "rdzvConf": ("list", {"key": LEAF, "value": LEAF}),
    "standalone": LEAF,
    "nProcPerNode": LEAF,
    "maxRestarts": LEAF,
    "metrics": ("list", "V2MetricSpec"),
}
_REPLICA_SPEC: Schema = {"replicas": LEAF, "restartPolicy": LEAF, "template": "V1PodTemplateSpec"}
_JOB_STATUS: Schema = {
    "conditions": (
        "list",
        {
            "type": LEAF,
            "status": LEAF,
            "reason": LEAF,
            "message": LEAF,
            "lastUpdateTime": LEAF,
            "lastTransitionTime": LEAF,
        },
    ),
    "replicaStatuses": (
        "map",
        {
            "active": LEAF,
            "succeeded": LEAF,
            "failed": LEAF,
            "labelSelector": "V1LabelSelector",
            "selector": LEAF,
        },
    ),
    "startTime": LEAF,
    "completionTime": LEAF,
    "lastReconcileTime": LEAF,
}
CUSTOM_SCHEMAS[("kubeflow.org/v1", "PyTorchJob")] = {
    "apiVersion": LEAF,
    "kind": LEAF,
    "metadata": "V1ObjectMeta",
    "spec": {
        "runPolicy": _RUN_POLICY,
        "elasticPolicy": _ELASTIC_POLICY,
        "pytorchReplicaSpecs": ("map", _REPLICA_SPEC),
        "nprocPerNode": LEAF,
    },
    "status": _JOB_STATUS,
}
# kubeflow.org/v1 TFJob (tensorflow_types.go TFJobSpec): the same RunPolicy, ReplicaSpec and JobStatus.
CUSTOM_SCHEMAS[("kubeflow.org/v1", "TFJob")] = {
    "apiVersion": LEAF,
    "kind": LEAF,
    "metadata": "V1ObjectMeta",
    "spec": {
        "runPolicy": _RUN_POLICY,
        "successPolicy": LEAF,
        "tfReplicaSpecs": ("map", _REPLICA_SPEC),
        "enableDynamicWorker": LEAF,
    },
    "status": _JOB_STATUS,
}


# jobset.x-k8s.io/v1alpha2 JobSet (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go).
# Per replicated job counts: JobSet's replicatedJobsStatus, and the TrainJob's jobsStatus copied from it.
_JOB_COUNTS: Schema = {
    "name": LEAF,
    "ready": LEAF,
    "succeeded": LEAF,
    "failed": LEAF,
    "active": LEAF,
    "suspended": LEAF,
}
_JOBSET_SPEC: Schema = {
    "replicatedJobs": (
        "list",
        {
            "name": LEAF,
            "groupName": LEAF,
            "template": "V1JobTemplateSpec",
            "replicas": LEAF,
            "dependsOn": ("list", {"name": LEAF, "status": LEAF}),
        },
    ),
    "network": {"enableDNSHostnames": LEAF, "subdomain": LEAF, "publishNotReadyAddresses": LEAF},
    "successPolicy": {"operator": LEAF, "targetReplicatedJobs": LEAF},
    "failurePolicy": {
        "maxRestarts": LEAF,
        "restartStrategy": LEAF,
        "rules": (
            "list",
            {
                "name": LEAF,
                "action": LEAF,
                "onJobFailureReasons": LEAF,
                "onJobFailureMessagePatterns": LEAF,
                "targetReplicatedJobs": LEAF,
            },
        ),
    },
    "startupPolicy": {"startupPolicyOrder": LEAF},
    "suspend": LEAF,
    "coordinator": {"replicatedJob": LEAF, "jobIndex": LEAF, "podIndex": LEAF},
    "managedBy": LEAF,
    "ttlSecondsAfterFinished": LEAF,
    "volumeClaimPolicies": (
        "list",
        {"templates": ("list", "V1PersistentVolumeClaim"), "retentionPolicy": {"whenDeleted": LEAF}},
    ),
}
CUSTOM_SCHEMAS[("jobset.x-k8s.io/v1alpha2", "JobSet")] = {
    "apiVersion": LEAF,
    "kind": LEAF,
    "metadata": "V1ObjectMeta",
    "spec": _JOBSET_SPEC,
    "status": {
        "conditions": ("list", "V1Condition"),
        "restarts": LEAF,
        "restartsCountTowardsMax": LEAF,
        "terminalState": LEAF,
        "replicatedJobsStatus": (
            "list",
            {
                **_JOB_COUNTS,
                "jobRestarts": LEAF,
                "jobRestartsCountTowardsMax": LEAF,
            },
        ),
        "previousInPlaceRestartAttempt": LEAF,
        "currentInPlaceRestartAttempt": LEAF,
    },
}

# trainer.kubeflow.org/v1alpha1 (kubeflow/trainer pkg/apis/trainer/v1alpha1): TrainJob and the runtimes.
_INITIALIZER: Schema = {
    "storageUri": LEAF,
    "env": ("list", "V1EnvVar"),
    "secretRef": "V1LocalObjectReference",
}
CUSTOM_SCHEMAS[("trainer.kubeflow.org/v1alpha1", "TrainJob")] = {
    "apiVersion": LEAF,
    "kind": LEAF,
    "metadata": "V1ObjectMeta",
    "spec": {
        "runtimeRef": {"name": LEAF, "apiGroup": LEAF, "kind": LEAF},
        "initializer": {"dataset": _INITIALIZER, "model": _INITIALIZER},
        "trainer": {
            "image": LEAF,
            "command": LEAF,
            "args": LEAF,
            "env": ("list", "V1EnvVar"),
            "numNodes": LEAF,
            "resourcesPerNode": "V1ResourceRequirements",
            "numProcPerNode": LEAF,
        },
        "runtimePatches": ("list", {"manager": LEAF, "time": LEAF, "trainingRuntimeSpec": LEAF}),
        "suspend": LEAF,
        "activeDeadlineSeconds": LEAF,
        "managedBy": LEAF,
    },
    "status": {
        "conditions": ("list", "V1Condition"),
        "jobsStatus": ("list", _JOB_COUNTS),
        "trainerStatus": {
            "progressPercentage": LEAF,
            "estimatedRemainingSeconds": LEAF,
            "metrics": ("list", {"name": LEAF, "value": LEAF}),
            "lastUpdatedTime": LEAF,
        },
    },
}
_RUNTIME: Schema = {
    "apiVersion": LEAF,
    "kind": LEAF,
    "metadata": "V1ObjectMeta",
    "spec": {
        "mlPolicy": {
            "numNodes": LEAF,
            "torch": {"envInjection": {"targets": ("list", {"jobName": LEAF, "containerNames": LEAF})}},
            "mpi": {
                "numProcPerNode": LEAF,
                "mpiImplementation": LEAF,
                "sshAuthMountPath": LEAF,
                "runLauncherAsNode": LEAF,
            },
            "flux": LEAF,
            "jax": LEAF,
            "xgboost": LEAF,
        },
        "podGroupPolicy": LEAF,
        "template": {"metadata": "V1ObjectMeta", "spec": _JOBSET_SPEC},
    },
}
CUSTOM_SCHEMAS[("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")] = _RUNTIME
CUSTOM_SCHEMAS[("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")] = _RUNTIME


# kueue.x-k8s.io/v1beta1 (kubernetes-sigs/kueue apis/kueue/v1beta1): the fields of the five kinds served.
_FLAVOR_QUOTAS: Schema = {
    "name": LEAF,
    "resources": (
        "list",
        {"name": LEAF, "nominalQuota": LEAF, "borrowingLimit": LEAF, "lendingLimit": LEAF},
    ),
}
_FLAVOR_USAGE: Schema = (
    "list",
    {"name": LEAF, "resources": ("list", {"name": LEAF, "total": LEAF, "borrowed": LEAF})},
)
_KUEUE_META: Schema = {"apiVersion": LEAF, "kind": LEAF, "metadata": "V1ObjectMeta"}
CUSTOM_SCHEMAS[("kueue.x-k8s.io/v1beta1", "ResourceFlavor")] = {
    **_KUEUE_META,
    "spec": {
        "nodeLabels": ("map", LEAF),
        "nodeTaints": ("list", "V1Taint"),
        "tolerations": ("list", "V1Toleration"),
        "topologyName": LEAF,
    },
}
CUSTOM_SCHEMAS[("kueue.x-k8s.io/v1beta1", "ClusterQueue")] = {
    **_KUEUE_META,
    "spec": {
        "resourceGroups": ("list", {"coveredResources": LEAF, "flavors": ("list", _FLAVOR_QUOTAS)}),
        "cohort": LEAF,
        "queueingStrategy": LEAF,
        "namespaceSelector": "V1LabelSelector",
        "flavorFungibility": {"whenCanBorrow": LEAF, "whenCanPreempt": LEAF},
        "preemption": {
            "reclaimWithinCohort": LEAF,
            "borrowWithinCohort": {"policy": LEAF, "maxPriorityThreshold": LEAF},
            "withinClusterQueue": LEAF,
        },
        "admissionChecks": LEAF,
        "admissionChecksStrategy": LEAF,
        "stopPolicy": LEAF,
        "fairSharing": {"weight": LEAF},
    },
    "status": {
        "conditions": ("list", "V1Condition"),
        "flavorsReservation": _FLAVOR_USAGE,
        "flavorsUsage": _FLAVOR_USAGE,
        "pendingWorkloads": LEAF,
        "reservingWorkloads": LEAF,
        "admittedWorkloads": LEAF,
        "pendingWorkloadsStatus": LEAF,
        "fairSharing": LEAF,
    },
}
CUSTOM_SCHEMAS[("kueue.x-k8s.io/v1beta1", "LocalQueue")] = {
    **_KUEUE_META,
    "spec": {"clusterQueue": LEAF, "stopPolicy": LEAF, "fairSharing": {"weight": LEAF}},
    "status": {
        "conditions": ("list", "V1Condition"),
        "pendingWorkloads": LEAF,
        "reservingWorkloads": LEAF,
        "admittedWorkloads": LEAF,
        "flavorsReservation": _FLAVOR_USAGE,
        "flavorUsage": _FLAVOR_USAGE,
        "flavors": LEAF,
        "fairSharing": LEAF,
    },
}
CUSTOM_SCHEMAS[("kueue.x-k8s.io/v1beta1", "Workload")] = {
    **_KUEUE_META,
    "spec": {
        "podSets": (
            "list",
            {
                "name": LEAF,
                "template": "V1PodTemplateSpec",
                "count": LEAF,
                "minCount": LEAF,
                "topologyRequest": LEAF,
            },
        ),
        "queueName": LEAF,
        "priorityClassName": LEAF,
        "priority": LEAF,
        "priorityClassSource": LEAF,
        "active": LEAF,
        "maximumExecutionTimeSeconds": LEAF,
    },
    "status": {
        "conditions": ("list", "V1Condition"),
        "admission": {
            "clusterQueue": LEAF,
            "podSetAssignments": (
                "list",
                {
                    "name": LEAF,
                    "flavors": ("map", LEAF),
                    "resourceUsage": ("map", LEAF),
                    "count": LEAF,
                    "topologyAssignment": LEAF,
                },
            ),
        },
        "requeueState": {"count": LEAF, "requeueAt": LEAF},
        "reclaimablePods": ("list", {"name": LEAF, "count": LEAF}),
        "admissionChecks": LEAF,
        "resourceRequests": LEAF,
    },
}
CUSTOM_SCHEMAS[("kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass")] = {
    **_KUEUE_META,
    "value": LEAF,
    "description": LEAF,
}

# kueue.x-k8s.io/v1beta2 (apis/kueue/v1beta2, the storage version since Kueue 0.16): v1beta1's fields with
# upstream's renames and removals (controllers/kueue/convert.py says which).
_V1B1 = "kueue.x-k8s.io/v1beta1"
_V1B2 = "kueue.x-k8s.io/v1beta2"


def _without(tree: dict[str, Schema], *drop: str, **add: Schema) -> dict[str, Schema]:
    return {**{k: v for k, v in tree.items() if k not in drop}, **add}


_CQ1 = CUSTOM_SCHEMAS[(_V1B1, "ClusterQueue")]
_LQ1 = CUSTOM_SCHEMAS[(_V1B1, "LocalQueue")]
_WL1 = CUSTOM_SCHEMAS[(_V1B1, "Workload")]
assert isinstance(_CQ1, dict) and isinstance(_LQ1, dict) and isinstance(_WL1, dict)
CUSTOM_SCHEMAS[(_V1B2, "ResourceFlavor")] = CUSTOM_SCHEMAS[(_V1B1, "ResourceFlavor")]
CUSTOM_SCHEMAS[(_V1B2, "WorkloadPriorityClass")] = CUSTOM_SCHEMAS[(_V1B1, "WorkloadPriorityClass")]
CUSTOM_SCHEMAS[(_V1B2, "ClusterQueue")] = {
    **_CQ1,
    "spec": _without(
        _CQ1["spec"],
        "cohort",
        "admissionChecks",
        cohortName=LEAF,
        admissionChecksStrategy={"admissionChecks": ("list", {"name": LEAF, "onFlavors": LEAF})},
        concurrentAdmissionPolicy=LEAF,
    ),
    "status": _without(_CQ1["status"], "pendingWorkloadsStatus"),
}
CUSTOM_SCHEMAS[(_V1B2, "LocalQueue")] = {
    **_LQ1,
    "status": _without(_LQ1["status"], "flavorUsage", "flavors", flavorsUsage=_FLAVOR_USAGE),
}
CUSTOM_SCHEMAS[(_V1B2, "Workload")] = {
    **_WL1,
    "spec": _without(
        _WL1["spec"],
        "priorityClassName",
        "priorityClassSource",
        priorityClassRef={"group": LEAF, "kind": LEAF, "name": LEAF},
        preemptionGates=LEAF,
    ),
    "status": _without(
        _WL1["status"], accumulatedPastExecutionTimeSeconds=LEAF, preemptionGates=LEAF, schedulingStats=LEAF
    ),
}
CUSTOM_SCHEMAS[(_V1B1, "Workload")] = {
    **_WL1,
    "status": _without(_WL1["status"], accumulatedPastExexcutionTimeSeconds=LEAF, schedulingStats=LEAF),
}


@functools.cache
def _model_fields(model_name: str) -> dict[str, Schema] | None:
    from kubernetes.client import models  # local import: only the server pays for the client

    cls = getattr(models, model_name, None)
    if cls is None or not hasattr(cls, "openapi_types"):
        return None
    return {cls.attribute_map[attr]: _parse_type(t) for attr, t in cls.openapi_types.items()}


def warm() -> None:
    """Import the client's models now (about half a second): the first create would otherwise pay it on
    the event loop, stalling every other request."""
    _model_fields("V1Pod")


def _parse_type(type_expr: str) -> Schema:
    if m := _LIST.match(type_expr):
        return ("list", _parse_type(m.group(1)))
    if m := _DICT.match(type_expr):
        return ("map", _parse_type(m.group(1)))
    if type_expr[:1].isupper() and type_expr not in ("V1Time", "V1MicroTime"):
        return type_expr
    return LEAF


def schema_for(api_version: str, kind: str) -> Schema | None:
    if (api_version, kind) in CUSTOM_SCHEMAS:
        return CUSTOM_SCHEMAS[(api_version, kind)]
    model = KIND_MODELS.get((api_version, kind))
    return model


def unknown_fields(obj: Any, schema: Schema, path: str = "") -> list[str]:
    """Paths of fields the schema does not know, in document order (``spec.template.spec.foo``)."""
    if schema == LEAF or schema is None:
        return []
    if isinstance(schema, tuple):
        container, inner = schema
        if container == "list" and isinstance(obj, list):
            return [p for i, item in enumerate(obj) for p in unknown_fields(item, inner, f"{path}[{i}]")]
        if container == "map" and isinstance(obj, dict):
            return [p for k, v in obj.items() for p in unknown_fields(v, inner, _join(path, k))]
        return []
    fields = schema if isinstance(schema, dict) else _model_fields(schema)
    if fields is None or not isinstance(obj, dict):
        return []
    problems: list[str] = []
    for key, value in obj.items():
        if key not in fields:
            problems.append(_join(path, key))
        else:
            problems.extend(unknown_fields(value, fields[key], _join(path, key)))
    return problems


def prune(obj: Any, schema: Schema) -> Any:
    """Drop unknown fields, as decoding into the Go types would."""
    if schema == LEAF or schema is None:
        return obj
    if isinstance(schema, tuple):
        container, inner = schema
        if container == "list" and isinstance(obj, list):
            return [prune(item, inner) for item in obj]
        if container == "map" and isinstance(obj, dict):
            return {k: prune(v, inner) for k, v in obj.items()}
        return obj
    fields = schema if isinstance(schema, dict) else _model_fields(schema)
    if fields is None or not isinstance(obj, dict):
        return obj
    return {k: prune(v, fields[k]) for k, v in obj.items() if k in fields}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
