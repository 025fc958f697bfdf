"""Names, labels, reasons and messages of trainer.kubeflow.org/v1alpha1, as kubeflow/trainer spells them
(pkg/apis/trainer/v1alpha1, pkg/constants, pkg/runtime/framework/plugins).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainJob"
TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME = "TrainingRuntime", "ClusterTrainingRuntime"
CONTROLLER_NAME = "trainjob-controller"
MANAGER = "trainer.kubeflow.org/trainjob-controller"
MULTIKUEUE_MANAGER = "kueue.x-k8s.io/multikueue"
WEBHOOK_TRAINJOB = "validator.trainjob.trainer.kubeflow.org"
WEBHOOK_TRAINING_RUNTIME = "validator.trainingruntime.trainer.kubeflow.org"
WEBHOOK_CLUSTER_TRAINING_RUNTIME = "validator.clustertrainingruntime.trainer.kubeflow.org"

# Condition types and reasons (trainjob_types.go) and messages (pkg/constants).
SUSPENDED, COMPLETE, FAILED = "Suspended", "Complete", "Failed"
SUSPENDED_REASON, RESUMED_REASON = "Suspended", "Resumed"
RUNTIME_NOT_SUPPORTED_REASON = "TrainingRuntimeNotSupported"
DEADLINE_EXCEEDED_REASON = "DeadlineExceeded"
SUSPENDED_MESSAGE = "TrainJob is suspended"
RESUMED_MESSAGE = "TrainJob is resumed"
DEADLINE_EXCEEDED_MESSAGE = "TrainJob exceeded its active deadline"
RESOURCES_CREATION_FAILED = "TrainJobResourcesCreationFailed"

# Runtime template labels and names.
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
ANCESTOR_TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"  # the trainer's replicated job and container
TRAINER_PORT = 29500  # ContainerTrainerPort: torchrun's rendezvous (PET_MASTER_PORT)
INITIALIZER_VOLUME = "initializer"
STORAGE_URI_ENV = "STORAGE_URI"

PET_NNODES = "PET_NNODES"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_NODE_RANK = "PET_NODE_RANK"
PET_MASTER_ADDR = "PET_MASTER_ADDR"
PET_MASTER_PORT = "PET_MASTER_PORT"
TORCH_RESERVED_ENVS = (PET_MASTER_ADDR, PET_MASTER_PORT, PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE)
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def runtime_ref(tj: Obj) -> Obj:
    return (tj.get("spec") or {}).get("runtimeRef") or {}


def registry_key(tj: Obj) -> str:
    """``RuntimeRefToRuntimeRegistryKey``: ``schema.GroupKind.String()`` (``Kind.group``)."""
    ref = runtime_ref(tj)
    kind, group = ref.get("kind") or "", ref.get("apiGroup") or ""
    return f"{kind}.{group}" if group else kind


def supported(tj: Obj) -> bool:
    ref = runtime_ref(tj)
    return ref.get("apiGroup") == GROUP and ref.get("kind") in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)


def suspended(tj: Obj) -> bool:
    return (tj.get("spec") or {}).get("suspend") is True


def managed_here(tj: Obj) -> bool:
    """``IsManagedByExternalController`` negated: no managedBy, or ours."""
    return (tj.get("spec") or {}).get("managedBy") in (None, MANAGER)


def master_addr(name: str) -> str:
    """``<trainjob>-node-0-0.<trainjob>``: the first node pod's DNS name through the headless Service."""
    return f"{name}-{NODE}-0-0.{name}"


def job_containers(runtime: Obj) -> dict[str, set[str]]:
    """Per replicated job of the runtime's JobSet template, the names of its containers and init containers
    (what the webhooks check TrainJob references against)."""
    rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "replicatedJobs"
    ) or []
    out: dict[str, set[str]] = {}
    for rjob in rjobs:
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
        names = {c.get("name") for c in (pod.get("spec") or {}).get("containers") or []}
        names |= {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []}
        out[str(rjob.get("name"))] = {str(n) for n in names}
    return out
