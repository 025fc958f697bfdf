"""Admission of kubeflow.org/v1 TFJobs: the CRD's structural type checks, the training operator's
validating webhook (``pkg/webhooks/tensorflow/tfjob_webhook.go``), then ``SetDefaults_TFJob``.

Same order and the same denial shape as the PyTorchJob's (:mod:`..pytorchjob.admission`, whose shared
pieces this uses): 422 Invalid for a wrong type, 403 ``admission webhook "validator.tfjob..." denied the
request`` for the webhook's errors; the defaults are stored (documented difference: upstream applies them
in memory in the controller).
"""

from __future__ import annotations

import copy

from ... import errors
from .. import webhook
from ..crd_types import check_type
from ..pytorchjob.admission import (
    FieldError,
    common_schema_errors,
    default_port,
    name_errors,
    run_policy_errors,
)
from ..pytorchjob.api import CLEAN_POD_POLICY_NONE, Obj
from .api import (
    CHIEF,
    CONTAINER_NAME,
    DEFAULT_PORT,
    DEFAULT_RESTART_POLICY,
    KIND,
    MASTER,
    PLURAL,
    PORT_NAME,
    REPLICA_TYPES,
    SUCCESS_POLICY_DEFAULT,
    WEBHOOK_NAME,
)

GROUP = "kubeflow.org"
_SPECS = "spec.tfReplicaSpecs"


def schema_errors(job: Obj) -> list[FieldError]:
    spec = job.get("spec")
    if spec is None:
        return []
    problems = check_type("spec", spec, "object")
    if problems:
        return problems
    problems += check_type("spec.successPolicy", spec.get("successPolicy"), "string")
    problems += check_type("spec.enableDynamicWorker", spec.get("enableDynamicWorker"), "boolean")
    return problems + common_schema_errors(spec, "tfReplicaSpecs")


def _replica_errors(rtype: str, rspec: Obj | None) -> list[FieldError]:
    containers_path = f"{_SPECS}[{rtype}].template.spec.containers"
    containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    problems: list[FieldError] = []
    if not containers:
        problems.append((containers_path, "FieldValueRequired", "Required value: must be specified"))
    for index, container in enumerate(containers):
        if not container.get("image"):
            problems.append(
                (
                    f"{containers_path}[{index}].image",
                    "FieldValueRequired",
                    "Required value: must be required",
                )
            )
    if not any(c.get("name") == CONTAINER_NAME for c in containers):
        detail = f"Required value: must have at least one container with name {CONTAINER_NAME}"
        problems.append((containers_path, "FieldValueRequired", detail))
    return problems


def webhook_errors(job: Obj) -> list[FieldError]:
    """``validateTFJob``: the name, the run policy, then ``validateTFReplicaSpecs``."""
    spec = job.get("spec") or {}
    problems = name_errors((job.get("metadata") or {}).get("name", ""))
    problems += run_policy_errors(spec.get("runPolicy") or {})
    replicas = spec.get("tfReplicaSpecs")
    if replicas is None:
        problems.append((_SPECS, "FieldValueRequired", "Required value: must be required"))
    for rtype, rspec in (replicas or {}).items():
        problems += _replica_errors(rtype, rspec)
    if sum(1 for rtype in replicas or {} if rtype in (CHIEF, MASTER)) > 1:
        detail = "Forbidden: must not have more than 1 Chief or Master role"
        problems.append((_SPECS, "FieldValueForbidden", detail))
    return list(dict.fromkeys(problems))


def _camel_case(specs: Obj) -> None:
    """``setTensorflowTypeNamesToCamelCase``: ``worker`` or ``WORKER`` becomes ``Worker``."""
    for canonical in REPLICA_TYPES:
        for key in list(specs):
            if key != canonical and key.lower() == canonical.lower():
                specs[canonical] = specs.pop(key)


def set_defaults(job: Obj) -> None:
    spec = job.setdefault("spec", {})
    policy = spec.setdefault("runPolicy", {})
    if policy.get("cleanPodPolicy") is None:
        policy["cleanPodPolicy"] = CLEAN_POD_POLICY_NONE
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = SUCCESS_POLICY_DEFAULT
    specs = spec.get("tfReplicaSpecs") or {}
    _camel_case(specs)
    for rspec in specs.values():
        if rspec is None:
            continue
        if rspec.get("replicas") is None:
            rspec["replicas"] = 1
        if not rspec.get("restartPolicy"):
            rspec["restartPolicy"] = DEFAULT_RESTART_POLICY
        default_port(rspec.setdefault("template", {}), CONTAINER_NAME, PORT_NAME, DEFAULT_PORT)


def admit_tfjob(obj: Obj, old: Obj | None) -> Obj:
    """The cluster's admission hook for tfjobs (create and update of the main resource)."""
    job = copy.deepcopy(obj)
    name = (job.get("metadata") or {}).get("name", "")
    type_problems = schema_errors(job)
    if type_problems:
        raise errors.invalid(KIND, GROUP, PLURAL, name, type_problems)
    problems = webhook_errors(job)
    if problems:
        raise webhook.denial(WEBHOOK_NAME, GROUP, PLURAL, name, problems)
    set_defaults(job)
    return job


__all__ = ["admit_tfjob", "schema_errors", "set_defaults", "webhook_errors"]
