"""Admission of kubeflow.org/v1 PyTorchJobs: the CRD's structural type checks, the training operator's
validating webhook, then its defaults.

Order matters and follows a real cluster: the apiserver checks field types against the CRD schema (422
Invalid), then calls the validating webhook with the object *as sent* (so a Master without ``replicas`` is
refused, as upstream's ``rSpec.Replicas == nil`` check does), and a denial comes back as the apiserver wraps
any webhook denial: 403 Forbidden, ``admission webhook "<name>" denied the request: <errors>``. Upstream
applies ``SetDefaults_PyTorchJob`` only in memory inside the controller; the local cluster stores the
defaults so a GET shows what the controller acts on (documented difference).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from airflow_k8s_ml.k8s.names import dns1035_label_errors

from ... import errors
from .. import webhook
from ..crd_types import check_type
from .api import (
    CLEAN_POD_POLICY_NONE,
    CONTAINER_NAME,
    DEFAULT_NPROC_PER_NODE,
    DEFAULT_PORT,
    DEFAULT_RESTART_POLICY,
    KIND,
    KUBEFLOW_MANAGER,
    MASTER,
    MULTIKUEUE_MANAGER,
    PORT_NAME,
    REPLICA_TYPES,
    WEBHOOK_NAME,
    WORKER,
    Obj,
)

GROUP, PLURAL = "kubeflow.org", "pytorchjobs"
_SPECS = "spec.pytorchReplicaSpecs"

# A field error as field.Error renders it: (path, reason for the Status cause, message after "<path>: ").
FieldError = tuple[str, str, str]


def _required(path: str, detail: str) -> FieldError:
    return (path, "FieldValueRequired", f"Required value: {detail}")


def _forbidden(path: str, detail: str) -> FieldError:
    return (path, "FieldValueForbidden", f"Forbidden: {detail}")


def _not_supported(path: str, value: str, supported: Iterable[str]) -> FieldError:
    listed = ", ".join(f'"{v}"' for v in supported)
    return (path, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {listed}')


# -- CRD structural schema: field types (422 Invalid, before any webhook) ---------------------------------
_INT_FIELDS = ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit")


def schema_errors(job: Obj) -> list[FieldError]:
    """Type checks of the fields the controller reads (the CRD's openAPIV3Schema would reject these)."""
    spec = job.get("spec")
    if spec is None:
        return []
    problems = check_type("spec", spec, "object")
    if problems:
        return problems
    problems += check_type("spec.nprocPerNode", spec.get("nprocPerNode"), "string")
    return problems + common_schema_errors(spec, "pytorchReplicaSpecs")


def common_schema_errors(spec: Obj, specs_key: str) -> list[FieldError]:
    """The type checks every v1 kind's CRD makes: its replica specs and its run policy."""
    problems = check_type(f"spec.{specs_key}", spec.get(specs_key), "object")
    for rtype, rspec in (spec.get(specs_key) or {}).items() if not problems else ():
        base = f"spec.{specs_key}.{rtype}"
        problems += check_type(base, rspec, "object")
        if isinstance(rspec, dict):
            problems += check_type(f"{base}.replicas", rspec.get("replicas"), "integer")
            problems += check_type(f"{base}.restartPolicy", rspec.get("restartPolicy"), "string")
    policy = spec.get("runPolicy")
    problems += check_type("spec.runPolicy", policy, "object")
    if isinstance(policy, dict):
        problems += [
            e for f in _INT_FIELDS for e in check_type(f"spec.runPolicy.{f}", policy.get(f), "integer")
        ]
        problems += check_type("spec.runPolicy.suspend", policy.get("suspend"), "boolean")
        problems += check_type("spec.runPolicy.cleanPodPolicy", policy.get("cleanPodPolicy"), "string")
        problems += check_type("spec.runPolicy.managedBy", policy.get("managedBy"), "string")
    return problems


# -- the validating webhook (pkg/webhooks/pytorch/pytorchjob_webhook.go) -------------------------------
def name_errors(name: str) -> list[FieldError]:
    """``NameIsDNS1035Label``: the webhook's own name rule (pods and Services are named after the job)."""
    problems = dns1035_label_errors(name)
    if not problems:
        return []
    return [
        ("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": should match: {",".join(problems)}')
    ]


def run_policy_errors(policy: Obj) -> list[FieldError]:
    """``util.ValidateRunPolicy``: only the Kubeflow and MultiKueue managers."""
    manager = policy.get("managedBy")
    if manager is None or manager in (KUBEFLOW_MANAGER, MULTIKUEUE_MANAGER):
        return []
    return [_not_supported("spec.runPolicy.managedBy", manager, (MULTIKUEUE_MANAGER, KUBEFLOW_MANAGER))]


def _elastic_errors(spec: Obj) -> list[FieldError]:
    elastic = spec.get("elasticPolicy")
    if elastic is None:
        return []
    problems: list[FieldError] = []
    worker = (spec.get("pytorchReplicaSpecs") or {}).get(WORKER)
    if worker is None:
        problems.append(_required(f"{_SPECS}.{WORKER}", "must be configured if elastic policy is used"))
    elif worker.get("replicas") is not None and int(worker["replicas"]) < 1:
        problems.append(
            _forbidden(f"{_SPECS}.{WORKER}.replicas", "must be at least 1 worker if elastic policy is used")
        )
    if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
        problems.append(
            _forbidden("spec.elasticPolicy.nProcPerNode", "must not be used with spec.nprocPerNode")
        )
    return problems


def _replica_errors(rtype: str, rspec: Obj | None) -> list[FieldError]:
    role = f"{_SPECS}[{rtype}]"
    containers_path = f"{role}.template.spec.containers"
    problems: list[FieldError] = []
    if rtype not in REPLICA_TYPES:
        problems.append(_not_supported(role, rtype, REPLICA_TYPES))
    containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    if not containers:
        problems.append(_required(containers_path, "must be specified"))
    for index, container in enumerate(containers):
        if not container.get("image"):
            problems.append(_required(f"{containers_path}[{index}].image", "must be required"))
    if not any(c.get("name") == CONTAINER_NAME for c in containers):
        problems.append(
            _required(containers_path, f"must have at least one container with name {CONTAINER_NAME}")
        )
    if rtype == MASTER and (rspec or {}).get("replicas") != 1:
        problems.append(_forbidden(f"{role}.replicas", "must be 1"))
    return problems


def webhook_errors(job: Obj) -> list[FieldError]:
    """``validatePyTorchJob``: every problem in the webhook's order, duplicates dropped (as the aggregate)."""
    spec = job.get("spec") or {}
    problems = name_errors((job.get("metadata") or {}).get("name", ""))
    problems += run_policy_errors(spec.get("runPolicy") or {})
    problems += _elastic_errors(spec)
    replicas = spec.get("pytorchReplicaSpecs")
    if replicas is None:
        problems.append(_required(_SPECS, "must be required"))
    for rtype, rspec in (replicas or {}).items():
        problems += _replica_errors(rtype, rspec)
    return list(dict.fromkeys(problems))


def denial(job: Obj, problems: list[FieldError]) -> errors.StatusError:
    """What the apiserver answers for a webhook denial (:func:`..webhook.denial`)."""
    return webhook.denial(WEBHOOK_NAME, GROUP, PLURAL, (job.get("metadata") or {}).get("name", ""), problems)


# -- SetDefaults_PyTorchJob (pkg/apis/kubeflow.org/v1/pytorch_defaults.go) ------------------------------
def default_port(
    template: Obj, container: str = CONTAINER_NAME, name: str = PORT_NAME, port: int = DEFAULT_PORT
) -> None:
    """``setDefaultPort``: add the kind's port (``pytorchjob-port: 23456``) to its default container (else
    the first) unless that container names the port."""
    containers = template.setdefault("spec", {}).setdefault("containers", [])
    if not containers:
        return
    index = next((i for i, c in enumerate(containers) if c.get("name") == container), 0)
    ports = containers[index].setdefault("ports", [])
    if not any(p.get("name") == name for p in ports):
        ports.append({"name": name, "containerPort": port})


def _default_elastic(spec: Obj) -> None:
    elastic = spec.get("elasticPolicy")
    if elastic is None or (elastic.get("maxReplicas") is not None and elastic.get("minReplicas") is not None):
        return
    if elastic.get("maxReplicas") is not None:
        elastic["minReplicas"] = elastic["maxReplicas"]
    elif elastic.get("minReplicas") is not None:
        elastic["maxReplicas"] = elastic["minReplicas"]
    else:
        workers = ((spec.get("pytorchReplicaSpecs") or {}).get(WORKER) or {}).get("replicas")
        elastic["minReplicas"] = elastic["maxReplicas"] = workers


def set_defaults(job: Obj) -> None:
    spec = job.setdefault("spec", {})
    policy = spec.setdefault("runPolicy", {})
    if policy.get("cleanPodPolicy") is None:
        policy["cleanPodPolicy"] = CLEAN_POD_POLICY_NONE
    for rspec in (spec.get("pytorchReplicaSpecs") or {}).values():
        if rspec is None:
            continue
        if rspec.get("replicas") is None:
            rspec["replicas"] = 1
        if not rspec.get("restartPolicy"):
            rspec["restartPolicy"] = DEFAULT_RESTART_POLICY
        default_port(rspec.setdefault("template", {}))
    _default_elastic(spec)
    elastic = spec.get("elasticPolicy")
    if (elastic is None or elastic.get("nProcPerNode") is None) and spec.get("nprocPerNode") is None:
        spec["nprocPerNode"] = DEFAULT_NPROC_PER_NODE


def admit_pytorchjob(obj: Obj, old: Obj | None) -> Obj:
    """The cluster's admission hook for pytorchjobs (create and update of the main resource)."""
    job = copy.deepcopy(obj)
    name = (job.get("metadata") or {}).get("name", "")
    type_problems = schema_errors(job)
    if type_problems:
        raise errors.invalid(KIND, GROUP, PLURAL, name, type_problems)
    problems = webhook_errors(job)
    if problems:
        raise denial(job, problems)
    set_defaults(job)
    return job


__all__ = [
    "FieldError",
    "admit_pytorchjob",
    "common_schema_errors",
    "default_port",
    "name_errors",
    "run_policy_errors",
    "schema_errors",
    "set_defaults",
    "webhook_errors",
]
