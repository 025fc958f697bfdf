"""Admission of JobSets: the CRD's defaults, the mutating webhook's defaults (``Default`` in
pkg/webhooks/jobset_webhook.go), then the validating webhook (``vjobset.kb.io``).

Defaults first, as on a real cluster: the mutating webhook runs before the validating one, so validation
sees Indexed completion mode, DNS hostnames on and an ``All`` success policy.
"""

from __future__ import annotations

import copy
import re

from airflow_k8s_ml.k8s.names import dns1035_label_errors, dns1123_subdomain_errors

from ... import errors
from ..crd_types import check_fields, check_type
from ..webhook import FieldError, denial, invalid, plain
from .api import GROUP, KIND, PLURAL, WEBHOOK_NAME, Obj, job_name, pod_hostname, replicas

_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
_MAX_MANAGED_BY = 63
_DNS1035_TOO_LONG = "must be no more than 63 characters"
_JOB_NAME_TOO_LONG = "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
_POD_NAME_TOO_LONG = "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
_SUBDOMAIN_TOO_LONG = "subdomain is too long, must be less than 63 characters"


def spec_type_errors(spec: object, base: str = "spec") -> list[FieldError]:
    """The CRD schema's types for the fields the controller reads (also a runtime's JobSet template)."""
    problems = check_type(base, spec, "object")
    if problems or not isinstance(spec, dict):
        return problems
    problems += check_fields(
        spec,
        base,
        {
            "replicatedJobs": "array",
            "suspend": "boolean",
            "network": "object",
            "successPolicy": "object",
            "failurePolicy": "object",
            "ttlSecondsAfterFinished": "integer",
            "managedBy": "string",
        },
    )
    problems += check_fields(
        spec.get("network"),
        f"{base}.network",
        {"enableDNSHostnames": "boolean", "subdomain": "string", "publishNotReadyAddresses": "boolean"},
    )
    problems += check_fields(
        spec.get("successPolicy"),
        f"{base}.successPolicy",
        {"operator": "string", "targetReplicatedJobs": "array"},
    )
    problems += check_fields(
        spec.get("failurePolicy"), f"{base}.failurePolicy", {"maxRestarts": "integer", "rules": "array"}
    )
    rjobs = spec.get("replicatedJobs")
    for i, rjob in enumerate(rjobs if isinstance(rjobs, list) else []):
        path = f"{base}.replicatedJobs[{i}]"
        problems += check_type(path, rjob, "object")
        problems += check_fields(
            rjob, path, {"name": "string", "replicas": "integer", "groupName": "string", "template": "object"}
        )
        template = rjob.get("template") if isinstance(rjob, dict) else None
        problems += check_fields(template, f"{path}.template", {"metadata": "object", "spec": "object"})
        job_spec = template.get("spec") if isinstance(template, dict) else None
        problems += check_fields(
            job_spec, f"{path}.template.spec", {"parallelism": "integer", "completions": "integer"}
        )
    return problems


def set_defaults(js: Obj) -> None:
    """CRD defaults (replicas 1, groupName ``default``, restartStrategy Recreate) and the webhook's."""
    spec = js.setdefault("spec", {})
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": "All"}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    for rjob in spec.get("replicatedJobs") or []:
        rjob.setdefault("replicas", 1)
        rjob.setdefault("groupName", "default")
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    policy = spec.get("failurePolicy")
    if policy is not None:
        policy.setdefault("restartStrategy", "Recreate")
        for i, rule in enumerate(policy.get("rules") or []):
            if not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"


def _subdomain_errors(value: str) -> list[FieldError]:
    path = "spec.network.subdomain"
    problems = [invalid(path, f'"{value}"', m) for m in dns1123_subdomain_errors(value)]
    for message in dns1035_label_errors(value):
        problems.append(
            invalid(path, f'"{value}"', _SUBDOMAIN_TOO_LONG if _DNS1035_TOO_LONG in message else message)
        )
    return problems


def _replicated_job_errors(name: str, index: int, rjob: Obj) -> list[FieldError]:
    path = f"spec.replicatedJobs[{index}]"
    longest = job_name(name, rjob.get("name", ""), replicas(rjob) - 1)
    problems = [
        invalid(f"{path}.name", f'"{longest}"', _JOB_NAME_TOO_LONG if _DNS1035_TOO_LONG in m else m)
        for m in dns1035_label_errors(longest)
    ]
    job_spec = (rjob.get("template") or {}).get("spec") or {}
    if job_spec.get("completionMode") == "Indexed" and job_spec.get("completions") is not None:
        pod = pod_hostname(name, rjob.get("name", ""), replicas(rjob) - 1, int(job_spec["completions"]) - 1)
        problems += [
            invalid(f"{path}.name", f'"{longest}"', _POD_NAME_TOO_LONG if _DNS1035_TOO_LONG in m else m)
            for m in dns1035_label_errors(pod + "-abcde")
        ]
    return problems


def _failure_policy_errors(policy: Obj, names: list[str]) -> list[FieldError]:
    problems: list[FieldError] = []
    seen: dict[str, list[int]] = {}
    for i, rule in enumerate(policy.get("rules") or []):
        rule_name = str(rule.get("name") or "")
        seen.setdefault(rule_name, []).append(i)
        if not 1 <= len(rule_name) <= 128:
            problems.append(
                plain(
                    f"invalid failure policy rule name of length {len(rule_name)}, the rule name must be at "
                    "least 1 characters long and at most 128 characters long"
                )
            )
        elif not _RULE_NAME.match(rule_name):
            problems.append(
                plain(
                    f"invalid failure policy rule name '{rule_name}', a failure policy rule name must start "
                    "with an alphabetic character, optionally followed by a string of alphanumeric "
                    "characters "
                    "or '_,:', and must end with an alphanumeric character or '_'"
                )
            )
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in names:
                problems.append(
                    plain(
                        f"invalid replicatedJob name '{target}' in failure policy does not appear in "
                        ".spec.ReplicatedJobs"
                    )
                )
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in _JOB_FAILURE_REASONS:
                problems.append(
                    plain(
                        f"invalid job failure reason '{reason}' in failure policy is not a recognized job "
                        "failure reason"
                    )
                )
    for rule_name, indices in seen.items():
        if len(indices) > 1:
            listed = "[" + " ".join(str(i) for i in indices) + "]"
            problems.append(
                plain(
                    f"rule names are not unique, rules with indices {listed} all have the same name "
                    f"'{rule_name}'"
                )
            )
    return problems


def webhook_errors(js: Obj) -> list[FieldError]:
    """``ValidateCreate``: every problem in the webhook's order."""
    spec = js.get("spec") or {}
    name = (js.get("metadata") or {}).get("name", "")
    problems: list[FieldError] = []
    rjobs = spec.get("replicatedJobs") or []
    if rjobs and rjobs[0].get("dependsOn"):
        problems.append(plain("DependsOn can't be set for the first ReplicatedJob"))
    network = spec.get("network") or {}
    if network.get("subdomain"):
        problems += _subdomain_errors(str(network["subdomain"]))
    manager = spec.get("managedBy")
    if manager is not None and len(str(manager)) > _MAX_MANAGED_BY:
        problems.append(
            ("spec.managedBy", "FieldValueTooLong", f"Too long: may not be more than {_MAX_MANAGED_BY} bytes")
        )
    names = [str(r.get("name", "")) for r in rjobs]
    for index, rjob in enumerate(rjobs):
        problems += _replicated_job_errors(name, index, rjob)
        for dep in rjob.get("dependsOn") or []:
            if dep.get("name") not in names[:index]:
                problems.append(
                    plain(
                        f"replicatedJob: {rjob.get('name')} cannot depend on replicatedJob: {dep.get('name')}"
                    )
                )
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            problems.append(
                plain(f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs")
            )
    if spec.get("failurePolicy") is not None:
        problems += _failure_policy_errors(spec["failurePolicy"], names)
    return problems


def _update_errors(js: Obj, old: Obj) -> list[FieldError]:
    """``ValidateUpdate``: replicated jobs and managedBy are immutable (pod template scheduling fields of a
    suspended JobSet may change, for Kueue)."""

    def munged(spec: Obj) -> list[Obj]:
        out = copy.deepcopy(spec.get("replicatedJobs") or [])
        for rjob in out:
            pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
            pod.pop("metadata", None)
            for key in ("nodeSelector", "tolerations", "schedulingGates"):
                (pod.get("spec") or {}).pop(key, None)
        return out

    new_spec, old_spec = js.get("spec") or {}, old.get("spec") or {}
    problems: list[FieldError] = []
    if munged(new_spec) != munged(old_spec):
        problems.append(
            ("spec.replicatedJobs", "FieldValueInvalid", 'Invalid value: "array": field is immutable')
        )
    if new_spec.get("managedBy") != old_spec.get("managedBy"):
        problems.append(
            ("spec.managedBy", "FieldValueInvalid", 'Invalid value: "string": field is immutable')
        )
    return problems


def admit_jobset(obj: Obj, old: Obj | None) -> Obj:
    js = copy.deepcopy(obj)
    name = (js.get("metadata") or {}).get("name", "")
    type_problems = spec_type_errors(js.get("spec") if "spec" in js else {})
    if type_problems:
        raise errors.invalid(KIND, GROUP, PLURAL, name, type_problems)
    set_defaults(js)
    problems = webhook_errors(js) if old is None else _update_errors(js, old)
    if problems:
        raise denial(WEBHOOK_NAME, GROUP, PLURAL, name, problems)
    return js


__all__ = ["admit_jobset", "set_defaults", "webhook_errors"]
