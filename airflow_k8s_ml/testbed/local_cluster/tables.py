"""``kubectl get`` columns: server-side Table rendering (Accept: application/json;as=Table;...)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .meta import parse_time

Obj = dict[str, Any]


def human_duration(seconds: float) -> str:
    """kubectl's ``duration.HumanDuration`` (k8s.io/apimachinery/pkg/util/duration), bucket for bucket."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _since(timestamp: str | None) -> str:
    """``translateTimestampSince``: a human duration, ``<unknown>`` without a time."""
    return human_duration(time.time() - parse_time(timestamp)) if timestamp else "<unknown>"


def _age(obj: Obj) -> str:
    return _since(obj.get("metadata", {}).get("creationTimestamp"))


def _job_status(obj: Obj) -> str:
    for cond in reversed(obj.get("status", {}).get("conditions") or []):
        if cond.get("status") == "True" and cond["type"] in (
            "Complete",
            "Failed",
            "Suspended",
            "FailureTarget",
            "SuccessCriteriaMet",
        ):
            return {
                "Failed": "Failed",
                "FailureTarget": "FailureTarget",
                "Suspended": "Suspended",
                "SuccessCriteriaMet": "SuccessCriteriaMet",
            }.get(cond["type"], "Complete")
    return "Running"


def _job_duration(obj: Obj) -> str:
    status = obj.get("status", {})
    if not status.get("startTime"):
        return ""
    end = parse_time(status["completionTime"]) if status.get("completionTime") else time.time()
    return human_duration(end - parse_time(status["startTime"]))


def _pod_summary(obj: Obj) -> tuple[str, str, str]:
    """``printPod``'s Ready, Status and Restarts cells (init containers aside: the local cluster has none)."""
    status = obj.get("status", {})
    reason = status.get("reason") or status.get("phase", "Pending")
    restarts, ready, last_restart, has_running = 0, 0, 0.0, False
    for cs in reversed(status.get("containerStatuses") or []):
        restarts += cs.get("restartCount", 0)
        finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        if finished:
            last_restart = max(last_restart, parse_time(finished))
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated")
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated is not None and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated is not None:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
        elif cs.get("ready") and "running" in state:
            has_running = True
            ready += 1
    if reason == "Completed" and has_running:
        conditions = status.get("conditions") or []
        ready_condition = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        reason = "Running" if ready_condition else "NotReady"
    if obj["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if last_restart:
        restarts_cell = f"{restarts} ({human_duration(time.time() - last_restart)} ago)"
    total = len(obj.get("spec", {}).get("containers") or [])
    return f"{ready}/{total}", reason, restarts_cell


def _readiness_gates(obj: Obj) -> str:
    gates = obj.get("spec", {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    true = {c.get("type") for c in obj.get("status", {}).get("conditions") or [] if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _last_condition(obj: Obj) -> str:
    conds = obj.get("status", {}).get("conditions") or []
    return conds[-1]["type"] if conds else ""


def _jobset_completed(obj: Obj) -> str:
    """``.status.conditions[?(@.type=="Completed")].status``."""
    conds = obj.get("status", {}).get("conditions") or []
    return next((str(c.get("status", "")) for c in conds if c.get("type") == "Completed"), "")


def _condition_status(type_: str) -> Callable[[Obj], str]:
    """``.status.conditions[?(@.type=='<type_>')].status``: empty when the condition is absent."""

    def cell(obj: Obj) -> str:
        conds = obj.get("status", {}).get("conditions") or []
        return next((str(c.get("status", "")) for c in conds if c.get("type") == type_), "")

    return cell


def _cohort(spec: dict[str, Any]) -> Any:
    """``.spec.cohortName`` (v1beta2) or ``.spec.cohort`` (v1beta1)."""
    return spec.get("cohortName", spec.get("cohort"))


def _json_scalar(value: Any) -> str:
    """A JSONPath cell of a scalar as kubectl prints it (booleans lower-case, missing empty)."""
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _format_labels(labels: dict[str, str] | None) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "<none>"


def _format_selector(selector: Obj | None) -> str:
    """``LabelSelectorAsSelector(...).String()``: requirements sorted by key; empty selects everything."""
    selector = selector or {}
    requirements = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], sorted(expr.get("values") or [])
        text = {
            "In": f"{key} in ({','.join(values)})",
            "NotIn": f"{key} notin ({','.join(values)})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, key)
        requirements.append((key, text))
    return ",".join(text for _, text in sorted(requirements))


def _template_containers(pod_spec: Obj) -> tuple[str, str]:
    containers = pod_spec.get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _workload_pod_spec(obj: Obj) -> Obj:
    """The pod spec of a Job, Deployment or ReplicaSet template, or of a CronJob's job template."""
    spec = obj.get("spec", {})
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"].get("spec", {})
    return spec.get("template", {}).get("spec", {})


def _service_ports(obj: Obj) -> str:
    pieces = []
    for port in obj["spec"].get("ports") or []:
        protocol = port.get("protocol", "TCP")
        node_port = port.get("nodePort")
        pieces.append(f"{port['port']}:{node_port}/{protocol}" if node_port else f"{port['port']}/{protocol}")
    return ",".join(pieces) or "<none>"


def _service_external_ip(obj: Obj) -> str:
    spec = obj["spec"]
    kind = spec.get("type", "ClusterIP")
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(spec.get("externalIPs") or []) or "<none>"
    if kind == "LoadBalancer":
        ingress = obj.get("status", {}).get("loadBalancer", {}).get("ingress") or []
        found = sorted(
            {i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")}
        )
        return ",".join([*found, *(spec.get("externalIPs") or [])]) or "<pending>"
    if kind == "ExternalName":
        return str(spec.get("externalName", ""))
    return "<unknown>"


def _hpa_targets(obj: Obj) -> str:
    """``formatHPAMetrics`` for autoscaling/v2: statuses are matched to specs by position, two at most."""
    specs = obj["spec"].get("metrics") or []
    if not specs:
        return "<none>"
    statuses = obj.get("status", {}).get("currentMetrics") or []
    shown: list[str] = []
    for index, spec in enumerate(specs):
        kind = spec.get("type", "")
        source = spec.get(kind[:1].lower() + kind[1:], {}) if kind else {}
        current_source = (statuses[index] if index < len(statuses) else {}).get(
            kind[:1].lower() + kind[1:]
        ) or {}
        target, current = source.get("target", {}), current_source.get("current", {})
        if kind == "Resource" and "averageValue" not in target:
            now = current.get("averageUtilization")
            goal = target.get("averageUtilization")
            text = (
                f"{source.get('name')}: {f'{now}%' if now is not None else '<unknown>'}/"
                f"{f'{goal}%' if goal is not None else '<auto>'}"
            )
        elif kind == "Resource":
            text = (
                f"{source.get('name')}: {current.get('averageValue', '<unknown>')}/{target['averageValue']}"
            )
        elif kind in ("External", "Object") and "averageValue" in target:
            text = f"{current.get('averageValue', '<unknown>')}/{target['averageValue']} (avg)"
        elif kind in ("External", "Object"):
            text = f"{current.get('value', '<unknown>')}/{target.get('value', '<unknown>')}"
        elif kind == "Pods":
            text = f"{current.get('averageValue', '<unknown>')}/{target.get('averageValue', '<unknown>')}"
        else:
            text = "<unknown type>"
        shown.append(text)
    more = len(shown) - 2
    return ", ".join(shown[:2]) + (f" + {more} more..." if more > 0 else "")


def _endpoints(obj: Obj) -> str:
    """``formatEndpoints``: ``ip:port`` pairs of ready addresses, three at most."""
    pairs = [
        f"{address['ip']}:{port['port']}" if port else address["ip"]
        for subset in obj.get("subsets") or []
        for port in (subset.get("ports") or [None])
        for address in subset.get("addresses") or []
    ]
    if not pairs:
        return "<none>"
    more = len(pairs) - 3
    return ",".join(pairs[:3]) + (f" + {more} more..." if more > 0 else "")


def _node_address(kind: str) -> Callable[[Obj], str]:
    def cell(obj: Obj) -> str:
        found = [a["address"] for a in obj.get("status", {}).get("addresses") or [] if a.get("type") == kind]
        return found[0] if found else "<none>"

    return cell


def _node_roles(obj: Obj) -> str:
    labels = obj["metadata"].get("labels") or {}
    roles = {
        k.removeprefix("node-role.kubernetes.io/") for k in labels if k.startswith("node-role.kubernetes.io/")
    }
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    return ",".join(sorted(r for r in roles if r)) or "<none>"


def _node_info(field: str) -> Callable[[Obj], str]:
    return lambda o: o.get("status", {}).get("nodeInfo", {}).get(field, "")


def _pdb_value(field: str) -> Callable[[Obj], str]:
    return lambda o: str(o["spec"][field]) if o["spec"].get(field) is not None else "N/A"


def _event_object(obj: Obj) -> str:
    involved = obj.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_last_seen(obj: Obj) -> str:
    return _since(
        obj.get("lastTimestamp") or obj.get("eventTime") or obj["metadata"].get("creationTimestamp")
    )


class Column(NamedTuple):
    """One Table column: ``priority`` 1 columns are printed by ``kubectl get -o wide`` only."""

    name: str
    type: str
    cell: Callable[[Obj], Any]
    priority: int = 0


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


_NAME = Column("Name", "string", _name)
_AGE = Column("Age", "string", _age)
_CONTAINERS = Column("Containers", "string", lambda o: _template_containers(_workload_pod_spec(o))[0], 1)
_IMAGES = Column("Images", "string", lambda o: _template_containers(_workload_pod_spec(o))[1], 1)


def _selector_column(read: Callable[[Obj], Obj | None]) -> Column:
    return Column("Selector", "string", lambda o: _format_selector(read(o)), 1)


_SPEC_SELECTOR = _selector_column(lambda o: o.get("spec", {}).get("selector"))
_CRONJOB_SELECTOR = _selector_column(
    lambda o: o["spec"].get("jobTemplate", {}).get("spec", {}).get("selector")
)
#: The last columns of every kind with a pod template (Job, Deployment, ReplicaSet).
_TEMPLATE_TAIL = (_AGE, _CONTAINERS, _IMAGES, _SPEC_SELECTOR)

#: Per kind, the columns of Kubernetes 1.32's printers (``pkg/printers/internalversion/printers.go``); the
#: PyTorchJob's, TrainJob's and JobSet's are their CRDs' ``additionalPrinterColumns``. Other kinds: Name and
#: Age.
COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        _NAME,
        Column("Ready", "string", lambda o: _pod_summary(o)[0]),
        Column("Status", "string", lambda o: _pod_summary(o)[1]),
        Column("Restarts", "string", lambda o: _pod_summary(o)[2]),
        _AGE,
        Column("IP", "string", lambda o: o.get("status", {}).get("podIP") or "<none>", 1),
        Column("Node", "string", lambda o: o.get("spec", {}).get("nodeName") or "<none>", 1),
        Column(
            "Nominated Node", "string", lambda o: o.get("status", {}).get("nominatedNodeName") or "<none>", 1
        ),
        Column("Readiness Gates", "string", _readiness_gates, 1),
    ],
    "Job": [
        _NAME,
        Column("Status", "string", _job_status),
        Column(
            "Completions",
            "string",
            lambda o: f"{o.get('status', {}).get('succeeded', 0)}/{o.get('spec', {}).get('completions', 1)}",
        ),
        Column("Duration", "string", _job_duration),
        *_TEMPLATE_TAIL,
    ],
    "CronJob": [
        _NAME,
        Column("Schedule", "string", lambda o: o["spec"].get("schedule", "")),
        Column("Timezone", "string", lambda o: o["spec"].get("timeZone") or "<none>"),
        Column("Suspend", "boolean", lambda o: bool(o["spec"].get("suspend", False))),
        Column("Active", "integer", lambda o: len(o.get("status", {}).get("active") or [])),
        Column(
            "Last Schedule",
            "string",
            lambda o: (
                _since(o["status"]["lastScheduleTime"])
                if o.get("status", {}).get("lastScheduleTime")
                else "<none>"
            ),
        ),
        _AGE,
        _CONTAINERS,
        _IMAGES,
        _CRONJOB_SELECTOR,
    ],
    "PyTorchJob": [_NAME, Column("State", "string", _last_condition), _AGE],
    "TFJob": [_NAME, Column("State", "string", _last_condition), _AGE],
    "TrainJob": [_NAME, Column("State", "string", _last_condition), _AGE],
    "JobSet": [
        _NAME,
        Column("TerminalState", "string", lambda o: o.get("status", {}).get("terminalState", "")),
        Column("Restarts", "string", lambda o: str(o.get("status", {}).get("restarts", ""))),
        Column("Completed", "string", _jobset_completed),
        Column("Suspended", "string", lambda o: _json_scalar(o.get("spec", {}).get("suspend"))),
        _AGE,
    ],
    # Kueue's CRD printer columns (apis/kueue/v1beta2 kubebuilder:printcolumn, v1beta1's the same on its
    # field names); with them no Age is added.
    "ClusterQueue": [
        _NAME,
        Column("Cohort", "string", lambda o: _json_scalar(_cohort(o.get("spec", {})))),
        Column("Strategy", "string", lambda o: _json_scalar(o.get("spec", {}).get("queueingStrategy")), 1),
        Column("Pending Workloads", "integer", lambda o: o.get("status", {}).get("pendingWorkloads")),
        Column("Admitted Workloads", "integer", lambda o: o.get("status", {}).get("admittedWorkloads"), 1),
    ],
    "LocalQueue": [
        _NAME,
        Column("ClusterQueue", "string", lambda o: _json_scalar(o.get("spec", {}).get("clusterQueue"))),
        Column("Pending Workloads", "integer", lambda o: o.get("status", {}).get("pendingWorkloads")),
        Column("Admitted Workloads", "integer", lambda o: o.get("status", {}).get("admittedWorkloads")),
    ],
    "Workload": [
        _NAME,
        Column("Queue", "string", lambda o: _json_scalar(o.get("spec", {}).get("queueName"))),
        Column(
            "Reserved in",
            "string",
            lambda o: _json_scalar((o.get("status", {}).get("admission") or {}).get("clusterQueue")),
        ),
        Column("Admitted", "string", _condition_status("Admitted")),
        Column("Finished", "string", _condition_status("Finished")),
        _AGE,
    ],
    "WorkloadPriorityClass": [_NAME, Column("Value", "integer", lambda o: o.get("value"))],
    "Deployment": [
        _NAME,
        Column(
            "Ready",
            "string",
            lambda o: f"{o.get('status', {}).get('readyReplicas', 0)}/{o['spec'].get('replicas', 1)}",
        ),
        Column("Up-to-date", "integer", lambda o: o.get("status", {}).get("updatedReplicas", 0)),
        Column("Available", "integer", lambda o: o.get("status", {}).get("availableReplicas", 0)),
        *_TEMPLATE_TAIL,
    ],
    "ReplicaSet": [
        _NAME,
        Column("Desired", "integer", lambda o: o["spec"].get("replicas", 1)),
        Column("Current", "integer", lambda o: o.get("status", {}).get("replicas", 0)),
        Column("Ready", "integer", lambda o: o.get("status", {}).get("readyReplicas", 0)),
        *_TEMPLATE_TAIL,
    ],
    "Service": [
        _NAME,
        Column("Type", "string", lambda o: o["spec"].get("type", "ClusterIP")),
        Column("Cluster-IP", "string", lambda o: (o["spec"].get("clusterIPs") or ["<none>"])[0]),
        Column("External-IP", "string", _service_external_ip),
        Column("Port(s)", "string", _service_ports),
        _AGE,
        Column("Selector", "string", lambda o: _format_labels(o["spec"].get("selector")), 1),
    ],
    "Endpoints": [_NAME, Column("Endpoints", "string", _endpoints), _AGE],
    "HorizontalPodAutoscaler": [
        _NAME,
        Column(
            "Reference",
            "string",
            lambda o: f"{o['spec']['scaleTargetRef'].get('kind')}/{o['spec']['scaleTargetRef'].get('name')}",
        ),
        Column("Targets", "string", _hpa_targets),
        Column("MinPods", "string", lambda o: str(o["spec"].get("minReplicas", 1))),
        Column("MaxPods", "integer", lambda o: o["spec"].get("maxReplicas", 0)),
        Column("Replicas", "integer", lambda o: o.get("status", {}).get("currentReplicas", 0)),
        _AGE,
    ],
    "PodDisruptionBudget": [
        _NAME,
        Column("Min Available", "string", _pdb_value("minAvailable")),
        Column("Max Unavailable", "string", _pdb_value("maxUnavailable")),
        Column("Allowed Disruptions", "integer", lambda o: o.get("status", {}).get("disruptionsAllowed", 0)),
        _AGE,
    ],
    "Namespace": [_NAME, Column("Status", "string", lambda o: o.get("status", {}).get("phase", "")), _AGE],
    "ConfigMap": [
        _NAME,
        Column("Data", "integer", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
        _AGE,
    ],
    "Secret": [
        _NAME,
        Column("Type", "string", lambda o: o.get("type", "Opaque")),
        Column("Data", "integer", lambda o: len(o.get("data") or {})),
        _AGE,
    ],
    "Event": [
        Column("Last Seen", "string", _event_last_seen),
        Column("Type", "string", lambda o: o.get("type", "")),
        Column("Reason", "string", lambda o: o.get("reason", "")),
        Column("Object", "string", _event_object),
        Column("Subobject", "string", lambda o: (o.get("involvedObject") or {}).get("fieldPath", ""), 1),
        Column("Source", "string", lambda o: (o.get("source") or {}).get("component", ""), 1),
        Column("Message", "string", lambda o: o.get("message", "")),
        Column("First Seen", "string", lambda o: _since(o.get("firstTimestamp")), 1),
        Column("Count", "string", lambda o: str(o.get("count", 1)), 1),
        Column("Name", "string", _name, 1),
    ],
    "Node": [
        _NAME,
        Column(
            "Status",
            "string",
            lambda o: (
                "Ready"
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in o.get("status", {}).get("conditions") or []
                )
                else "NotReady"
            ),
        ),
        Column("Roles", "string", _node_roles),
        _AGE,
        Column("Version", "string", _node_info("kubeletVersion")),
        Column("Internal-IP", "string", _node_address("InternalIP"), 1),
        Column("External-IP", "string", _node_address("ExternalIP"), 1),
        Column("OS-Image", "string", _node_info("osImage"), 1),
        Column("Kernel-Version", "string", _node_info("kernelVersion"), 1),
        Column("Container-Runtime", "string", _node_info("containerRuntimeVersion"), 1),
    ],
}


def to_table(items: list[Obj], kind: str, resource_version: str) -> Obj:
    """A ``meta.k8s.io/v1`` Table with every column (the API server always renders the wide cells; kubectl
    hides priority 1 columns unless ``-o wide``)."""
    columns = COLUMNS.get(kind, [_NAME, _AGE])
    definitions = [
        {
            "name": c.name,
            "type": c.type,
            "format": "name" if c.cell is _name else "",
            "description": c.name,
            "priority": c.priority,
        }
        for c in columns
    ]
    rows = [{"cells": [c.cell(o) for c in columns], "object": o} for o in items]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    }


def wants_table(accept: str) -> bool:
    return "as=Table" in accept
