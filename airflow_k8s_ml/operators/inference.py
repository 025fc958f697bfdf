"""``InferenceDeploymentOperator``: put a model behind a Service, prove it answers, or put the old one back.

The task is: apply Deployment, Service, HPA, PDB and NetworkPolicy to the desired state (a rerun with the
same inputs changes nothing, and an unchanged object is not written), follow the rollout with ``kubectl
rollout status`` logic under an Airflow-side deadline (in the worker for up to ``defer_after``, then
deferred), smoke-test through the API server's service proxy, and on a failed rollout, an expired
deadline or a failed smoke test roll back the way ``kubectl rollout undo`` does, wait for the old revision to
be healthy, and fail naming the reason and the revision now serving.

Why the rollback is to the revision that served *before this task*: ``undo`` without a revision picks the
second newest, which after a rerun or a concurrent deploy may not be what was live. We remember the revision
read before the apply and restore exactly its template. A first deploy has nothing to go back to: its
objects stay for inspection and the task fails saying so.

Import-light and declarative: ``kubernetes``, the trigger, the client, the typed specs and the execute-time
helpers (rollout report, smoke probe, rollback) are imported inside the methods. ``__init__`` judges the
literal arguments with the rule functions (:func:`~airflow_k8s_ml.operators._serving.check_inference_args`),
building nothing; every object is rendered in ``execute``, from the rendered arguments, before any API call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.errors import WorkloadFailed
from airflow_k8s_ml.manifests.formats import validate_namespace
from airflow_k8s_ml.manifests.serving_rules import check_canary_fields
from airflow_k8s_ml.manifests.validation import check_bool, check_non_empty_str
from airflow_k8s_ml.operators import _defer_state
from airflow_k8s_ml.operators._args import PLACEHOLDER, is_templated, seconds_or_zero, to_timedelta
from airflow_k8s_ml.operators._runner import _Runner
from airflow_k8s_ml.operators._serving import (
    InferenceArgs,
    check_inference_args,
    inference_spec,
    neutral,
    render_inference,
    resolve_model_uri,
)
from airflow_k8s_ml.operators._smoke import validate_smoke_args
from airflow_k8s_ml.operators.links import InferenceServiceLink

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.manifests.naming import RunKey
    from airflow_k8s_ml.operators._smoke_probe import SmokeSettings
    from airflow_k8s_ml.operators.record import WorkloadRecord
    from airflow_k8s_ml.operators.wait_settings import WaitSettings
    from airflow_k8s_ml.status.canary import CanarySettings
    from airflow_k8s_ml.triggers.events import WorkloadEvent

__all__ = ["InferenceDeploymentOperator"]

#: What a templated smoke argument stands for at parse time: a valid path of its kind (the rendered value is
#: checked in ``execute``; the placeholder itself is no path, so judging it would fail the DAG import).
_PATH_STAND_INS = {"smoke_path": "/" + PLACEHOLDER, "expected_response": "$"}
#: Seconds between the trigger's status reads when its watch falls back to polling (a rollout is short).
ROLLOUT_POLL_SECONDS = 2.0
#: Optional objects and how to find a stale one to prune when the argument is dropped.
_OPTIONAL_KINDS = (
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
)


def _parse_time_args(args: InferenceArgs) -> InferenceArgs:
    """Templated strings and XComArgs (``gate.output``, resolved at run time) become placeholders
    (:func:`~airflow_k8s_ml.operators._serving.neutral`); a templated smoke path or response path a valid
    stand-in (:data:`_PATH_STAND_INS`)."""
    out = neutral(args)
    stand_ins: dict[str, Any] = {}
    for name, stand_in in _PATH_STAND_INS.items():
        value = getattr(out, name)
        if value == PLACEHOLDER:
            stand_ins[name] = stand_in
        elif isinstance(value, list | tuple):
            stand_ins[name] = [stand_in if item == PLACEHOLDER else item for item in value]
    return out._replace(**stand_ins) if stand_ins else out


def _check_rollback_to(value: Any) -> None:
    """None, a revision number (>= 1) or ``"previous"``; whether it is recorded is known in ``execute``."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "previous"):
        return
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        from airflow_k8s_ml.errors import ValidationError

        raise ValidationError("rollback_to", f"must be a revision number (>= 1) or 'previous', got {value!r}")


#: A templated ``canary`` value at parse time: a valid value of its key (judged once rendered).
_CANARY_STAND_INS = {"percent": 1, "analysis_seconds": 1, "max_error_rate": 0, "min_requests": 1}


def _parse_time_canary(value: Any) -> Any:
    """``canary`` with each templated value replaced by a valid stand-in, so its other keys (and unknown
    ones) are still judged when the DAG is parsed; a wholly templated ``canary`` is judged once rendered."""
    if not is_templated(value):
        return value
    if not isinstance(value, Mapping):
        return None
    return {key: _CANARY_STAND_INS.get(key, 1) if is_templated(item) else item for key, item in value.items()}


def _canary_settings(value: Any) -> CanarySettings | None:
    """``canary`` (rendered) by its rules, as the verdict's settings; None when off."""
    from airflow_k8s_ml.status.canary import CanarySettings

    checked = check_canary_fields(value)
    return None if checked is None else CanarySettings(**checked)


def _silent() -> Any:
    """A logger that says nothing (a look whose lines another shell will say)."""
    import logging

    quiet = logging.getLogger("airflow_k8s_ml.operators.inference.silent")
    quiet.disabled = True
    return quiet


def _check_smoke(args: InferenceArgs) -> None:
    validate_smoke_args(args.smoke_path, args.smoke_request, args.expected_response, args.expected_status)


class InferenceDeploymentOperator(_Runner):
    """Deploy a model server (Deployment + Service, optional HPA, PDB, NetworkPolicy), verify, or roll back.

    Returns (XCom) ``{"deployment", "namespace", "revision", "model_uri", "service", "service_url",
    "cluster_url", "changes", "smoke"}``; ``service_url`` is the API server's proxy path to the Service.

    :param name: name of the Deployment and of every object with it (a DNS-1035 label, templated).
    :param model_uri: checkpoint URI, or the checkpoint gate's XCom ``{"uri", ...}`` (templated). Injected as
        env ``MODEL_URI`` and recorded as label + annotation; a new URI is what rolls the pods.
    :param image, command, args, env, secret_env, env_from, requests, limits, gpus: the container.
        ``secret_env={"VAR": "secret:key"}`` becomes a secretKeyRef (secrets never enter the manifest).
    :param pod_options: any other ``PodTemplate`` field (tolerations, node_selector, volumes, field_env,
        service_account, pod_security_context, ...).
    :param replicas: fixed replica count; exclusive with ``autoscaling``.
    :param port, service_port: container port (env ``PORT``) and Service port.
    :param readiness_path, liveness_path: httpGet probe paths (defaults fit ``workloads.serve``).
    :param deployment_options: ``max_surge`` (1), ``max_unavailable`` (0), ``min_ready_seconds``,
        ``progress_deadline_seconds`` (600, Kubernetes' own ProgressDeadlineExceeded),
        ``revision_history_limit``, ``probe_period_seconds``, ``startup_timeout_seconds``.
    :param autoscaling: ``Autoscaling`` or its fields as a dict (``min_replicas``, ``max_replicas``,
        ``target_cpu_utilization``, ``target_requests_per_second`` (per pod, on the ``Pods`` metric
        ``http_requests_per_second``), ``autoscale_metric`` ("cpu", "rps" or "both": which given targets
        to use), ``metric_name``/``metric_type``/``metric_target``, ``scale_down_stabilization_seconds``).
        The HPA then owns the replica count: re-applies never reset it.
    :param pdb_min_available: PodDisruptionBudget ``minAvailable`` (int or percentage).
    :param network_policy: ``IngressPolicy`` or a dict (``from_namespaces``, ``from_pod_labels``,
        ``from_cidrs``): only these may reach the server port.
    :param deployment_overrides: raw escape hatch, a JSON merge patch applied to the rendered Deployment
        (sidecars, topology spread...); name, namespace and selector may not change.
    :param rollout_timeout: Airflow-side budget for the rollout (and again for a rollback): timedelta or
        seconds, or an absolute time (datetime or ISO 8601), templated; parsed by ``Deadlines`` as every
        operator's ``deadline`` is.
    :param defer_after: follow the rollout in the worker this long (timedelta or s; 0: defer at once) before
        deferring. A rollout done sooner costs no hand-over to the triggerer and no second worker start for
        ``execute_complete`` (measured 4-9 s on a real Airflow, often more than the rollout itself); a
        longer one is deferred as before, its progress logged in both places.
    :param smoke_path: path for the sample request (GET, or POST with ``smoke_request``).
    :param smoke_request: JSON body to POST to ``smoke_path``.
    :param expected_response: dict subset and/or ``$.json.path`` keys, or path(s) that must exist.
    :param expected_status: HTTP status the sample request must return.
    :param smoke_timeout: seconds to keep retrying the readiness call (endpoints may lag the rollout).
    :param rollback_on_failure: roll back a failed rollout or smoke test (default True).
    :param rollback_to: deploy a recorded revision again instead of ``model_uri``: its number, or
        ``"previous"`` (the newest revision before the serving one); templated. Its model and record are
        reused as they were, so the template is that revision's again and Kubernetes takes its ReplicaSet
        back. A revision not recorded fails before anything changes. Every deploy records in the pod
        template which model (URI, the gate's step and metrics) and which Airflow run each revision serves;
        the history is in the XCom (``model_history``).
    :param canary: roll a *new* model out as a canary first: ``{"percent": 20, "analysis_seconds": 120,
        "max_error_rate": 0.01, "min_requests": 50}`` (templated; ``percent`` 0 or None: off). A canary
        Deployment ``<name>-canary`` with the new model starts beside the stable one, behind the same
        Service (its share of the ready pods ~ ``percent``), its pods are smoke-tested through the pod
        proxy, then it is judged over ``analysis_seconds`` on its request and error counters from the
        custom metrics API (``status.canary.judge``; deferred when longer than ``defer_after``). Promoted:
        the stable Deployment takes the new model, the canary is removed. Rolled back: the canary is
        removed, the stable Deployment was never touched, and the task fails. Reason and counts are logged
        and pushed (XCom ``canary``). A first deploy, an unchanged model and ``rollback_to`` take no canary.
    """

    template_fields: Sequence[str] = (
        "name",
        "namespace",
        "model_uri",
        "image",
        "command",
        "args",
        "env",
        "labels",
        "annotations",
        "smoke_path",
        "smoke_request",
        "expected_response",
        "rollout_timeout",
        "rollback_to",
        "canary",
        "autoscaling",
    )
    ui_color = "#e3f0e8"
    operator_extra_links = (InferenceServiceLink(),)
    renamed_arguments = MappingProxyType({"env_from_secrets": "env_from"})
    # The arguments read by name, for type checkers (kept by ``_keep_arguments`` from the signature).
    name: str
    namespace: str | None
    port: int
    service_port: int
    readiness_path: str
    smoke_path: str | None
    smoke_request: Mapping[str, Any] | None
    expected_response: Any
    expected_status: int
    rollback_to: int | str | None
    canary: Mapping[str, Any] | None
    #: A literal budget is parsed in ``__init__``; a template once rendered (``_rollout_settings``).
    rollout_timeout: Any

    def __init__(
        self,
        *,
        name: str,
        model_uri: str | Mapping[str, Any],
        image: str,
        namespace: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, Any] | None = None,
        secret_env: Mapping[str, str] | None = None,
        env_from: Sequence[str] | None = None,
        requests: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        gpus: int | None = None,
        pod_options: Mapping[str, Any] | None = None,
        replicas: int | None = None,
        port: int = 8080,
        service_port: int = 80,
        readiness_path: str = "/readyz",
        liveness_path: str | None = "/healthz",
        deployment_options: Mapping[str, Any] | None = None,
        autoscaling: Any = None,
        pdb_min_available: int | str | None = None,
        network_policy: Any = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        deployment_overrides: Mapping[str, Any] | None = None,
        rollout_timeout: timedelta | datetime | float | str = timedelta(minutes=15),
        defer_after: timedelta | float = timedelta(seconds=30),
        smoke_path: str | None = None,
        smoke_request: Mapping[str, Any] | None = None,
        expected_response: Any = None,
        expected_status: int = 200,
        smoke_timeout: float = 60.0,
        rollback_on_failure: bool = True,
        rollback_to: int | str | None = None,
        canary: Mapping[str, Any] | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        env_from_secrets: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._keep_arguments(locals())
        self.defer_after = seconds_or_zero(defer_after, "defer_after")
        self.smoke_timeout = float(to_timedelta(smoke_timeout, "smoke_timeout").total_seconds())  # type: ignore[union-attr]
        self.rollback_on_failure = check_bool(rollback_on_failure, "rollback_on_failure")
        if not is_templated(rollback_to):
            _check_rollback_to(rollback_to)
        check_canary_fields(_parse_time_canary(canary))  # a typo or a bad literal fails the DAG import
        self.kubernetes_conn_id = check_non_empty_str(kubernetes_conn_id, "kubernetes_conn_id")
        if not is_templated(rollout_timeout):  # a template is parsed once rendered, in execute
            self.rollout_timeout = self._rollout_settings().deadlines.deadline
        self._check_literals(_parse_time_args(self._arguments()))  # a typo fails the DAG import

    # -- arguments --------------------------------------------------------------------------------------
    def _arguments(self) -> InferenceArgs:
        """The arguments that shape or check the objects, read once into a frozen value (rendered in
        ``execute``; at parse time :func:`_parse_time_args` neutralises them)."""
        return InferenceArgs.read(self)

    @staticmethod
    def _check_literals(args: InferenceArgs) -> None:
        """Parse time: the arguments by the rule functions, building nothing. ``labels`` (which may not take
        our keys) and ``deployment_overrides`` (which may not change identity or selector) are judged
        against the rendered objects, so when given they are rendered here too, as ``execute`` would."""
        if args.namespace is not None:
            validate_namespace(args.namespace)
        _check_smoke(args)
        check_inference_args(args)
        if args.labels or args.deployment_overrides is not None:
            from airflow_k8s_ml.operators._workload import parse_time_key

            InferenceDeploymentOperator._check(args, parse_time_key())

    @staticmethod
    def _check(args: InferenceArgs, key: RunKey, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object, rendered and validated (pure): runs before any API call."""
        namespace = namespace or args.namespace or "default"
        validate_namespace(namespace)
        _check_smoke(args)
        spec = inference_spec(args)
        return render_inference(spec, args.name, namespace, key, args.deployment_overrides)

    # -- execute ----------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        from airflow_k8s_ml.operators._rollout_report import revision

        self._execute_started = time.time()
        args = self._arguments()
        if args.namespace is not None:
            validate_namespace(args.namespace)
        settings = self._rollout_settings()  # a bad rendered rollout_timeout fails before any API call
        client = self._client(self.namespace)
        namespace = args.namespace or client.namespace
        key = self._run_key(context)
        objects = self._check(args, key, namespace)  # before any API call
        model_uri = resolve_model_uri(args.model_uri)
        _check_rollback_to(self.rollback_to)

        before = client.get("apps/v1", "Deployment", self.name, namespace)
        previous = revision(before)
        from airflow_k8s_ml.operators._versions import (
            model_metrics,
            new_record,
            record_for,
            with_model_record,
        )

        if self.rollback_to is not None:  # a recorded revision again: known (or refused) before any write
            entry = self._recorded(client, before, self.rollback_to)
            model_uri, record = entry["model_uri"], entry["record"]
            objects = self._check(args._replace(model_uri=model_uri), key, namespace)
            self.log.info(
                "rollback_to=%r: deploying revision %d again (model %s)",
                self.rollback_to,
                entry["revision"],
                model_uri,
            )
        else:
            run = {"dag_id": key.dag_id, "task_id": key.task_id, "run_id": key.run_id}
            record = record_for(before, model_uri, new_record(model_uri, model_metrics(args.model_uri), run))
        objects = with_model_record(objects, record)
        canary = _canary_settings(self.canary)
        if canary is not None and self.rollback_to is None and before is not None:
            from airflow_k8s_ml.operators._rollout_report import served_model

            if served_model(before) != model_uri:
                state = {"previous_revision": previous, "model_uri": model_uri, "model_record": record}
                return self._start_canary(context, client, objects, before, canary, state, settings)
            self.log.info("canary: model %s already serves; nothing to judge", model_uri)
        changes, deployment = self._apply(client, objects, hpa_owns_replicas=args.autoscaling is not None)
        self.log.info(
            "applied %s; revision serving before: %s",
            ", ".join(f"{kind} {action}" for kind, action in changes.items()),
            previous or "none (first deploy)",
        )
        state = {
            "previous_revision": previous,
            "changes": changes,
            "model_uri": model_uri,
            "model_record": record,
        }
        return self._await_rollout(context, client, deployment, settings, state)

    def _await_rollout(
        self,
        context: Context,
        client: KubeClient,
        deployment: Mapping[str, Any],
        settings: WaitSettings,
        state: dict[str, Any],
    ) -> Any:
        """Follow the rollout of ``deployment`` from the worker for ``defer_after``, then defer; either way
        it ends in :meth:`_rollout_ended` with ``state``. Its budget counts from here, in the worker and in
        the trigger alike; a kill never takes the service down (the trigger does not delete)."""
        record = self._deployment_record(deployment, started_at=time.time())
        event = self._follow_rollout(client, deployment, record, settings)
        if event is not None:
            return self._rollout_ended(context, client, event, state)
        _defer_state.stash(context, "execute_complete", {"state": state})
        self.defer(
            trigger=settings.trigger(record, delete_on_kill=False),
            method_name="execute_complete",
            kwargs={"state": state},
            timeout=self._deferral_timeout(context),
        )

    @staticmethod
    def _recorded(client: KubeClient, deployment: Mapping[str, Any] | None, rollback_to: Any) -> dict:
        """The recorded revision ``rollback_to`` names (ValidationError naming it when there is none)."""
        from airflow_k8s_ml.kube.serving_ops import replica_sets_of
        from airflow_k8s_ml.operators._versions import choose_revision, history

        replica_sets = replica_sets_of(client, deployment) if deployment is not None else []
        return choose_revision(history(deployment, replica_sets), rollback_to)

    def _rollout_settings(self) -> WaitSettings:
        """``rollout_timeout`` as the wait's overall ``deadline``, parsed by ``Deadlines`` (errors name
        ``rollout_timeout``); no log relay (a server's log is not the task's)."""
        from airflow_k8s_ml.errors import ValidationError
        from airflow_k8s_ml.operators.wait_settings import WaitSettings

        try:
            return WaitSettings.build(
                kubernetes_conn_id=self.kubernetes_conn_id,
                admission_timeout=None,
                startup_timeout=None,
                run_timeout=None,
                deadline=self.rollout_timeout,
                poll_interval=ROLLOUT_POLL_SECONDS,
                stream_logs=False,
                log_lines=10,
            )
        except ValidationError as exc:
            raise ValidationError("rollout_timeout", exc.message) from None

    @staticmethod
    def _deployment_record(deployment: Mapping[str, Any], started_at: float) -> WorkloadRecord:
        """The Deployment as the wait's target (its uid pinned: a replaced Deployment is an error)."""
        from airflow_k8s_ml.operators.record import WorkloadRecord

        meta = deployment.get("metadata") or {}
        return WorkloadRecord(
            kind="Deployment",
            api_version="apps/v1",
            name=str(meta.get("name")),
            namespace=str(meta.get("namespace")),
            uid=str(meta.get("uid") or ""),
            attempt=1,
            submitted_at=started_at,
        )

    def _worker_wait(self) -> float:
        """``defer_after``, but never past ``rollout_timeout`` (the trigger then reports the deadline)."""
        limit = self.rollout_timeout if not is_templated(self.rollout_timeout) else None
        if isinstance(limit, timedelta):
            return min(self.defer_after, limit.total_seconds())
        if isinstance(limit, datetime):
            return max(0.0, min(self.defer_after, limit.timestamp() - time.time()))
        return self.defer_after

    def _follow_rollout(
        self,
        client: KubeClient,
        deployment: Mapping[str, Any],
        record: WorkloadRecord,
        settings: WaitSettings,
    ) -> WorkloadEvent | None:
        """The rollout's end as the trigger would report it, if it comes within ``defer_after``: the
        Deployment as applied, then each new version of it from a watch, each judged by the one wait report
        (``status.wait_report``, kubectl's rollout logic in ``status.rollout``). An unchanged Deployment
        ends at the first look, with no watch. None: still rolling out, defer (a failure of the watch too:
        the trigger then reports, so failure handling stays in one place)."""
        import itertools

        from airflow_k8s_ml.kube.serving_ops import watch_versions
        from airflow_k8s_ml.triggers.sync_wait import follow

        seconds = self._worker_wait()
        versions = itertools.chain(
            [deployment], watch_versions(client, deployment, seconds) if seconds > 0 else ()
        )
        # Deferring at once (defer_after=0): the one look only asks "already rolled out?"; its lines are
        # the trigger's to say, or they would be said twice.
        log = self.log if seconds > 0 else _silent()
        try:
            event = follow(client, record, settings, log, versions)
        except Exception as exc:  # the trigger will wait instead; never fail a deploy over this watch
            self.log.warning("following the rollout in the worker failed (%s); deferring", exc)
            return None
        if event is None:
            self.log.info("rollout still in progress after %gs; deferring to the triggerer", seconds)
        return event

    def _apply(
        self, client: KubeClient, objects: list[dict[str, Any]], *, hpa_owns_replicas: bool
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """Create or server-side-apply each object that differs from the desired state (an unchanged one is
        not written at all), every write validated by the server before the first one lands (nothing is
        half-created by a typo in ``deployment_overrides``); drop optional objects no longer wanted.

        With an HPA, ``spec.replicas`` is left out of the apply (a new Deployment is still created with
        ``min_replicas``): the HPA owns the count, and re-sending ``min_replicas`` would scale a busy service
        down on every run.
        """
        from airflow_k8s_ml.kube.serving_ops import apply_objects, prune
        from airflow_k8s_ml.manifests.serving import SELECTOR_LABEL, strip_replicas

        changes: dict[str, str] = {}
        deployment: dict[str, Any] = {}
        namespace = objects[0]["metadata"]["namespace"]
        bodies = [
            (strip_replicas(obj) if obj["kind"] == "Deployment" and hpa_owns_replicas else obj, obj)
            for obj in objects
        ]
        for obj, (live, action) in zip(objects, apply_objects(client, bodies), strict=True):
            changes[obj["kind"]] = action
            if obj["kind"] == "Deployment":
                deployment = live
        wanted = {obj["kind"] for obj in objects}
        for api_version, kind in _OPTIONAL_KINDS:
            if kind not in wanted and prune(
                client, api_version, kind, self.name, namespace, {SELECTOR_LABEL: self.name}
            ):
                changes[kind] = "deleted"
        return changes, deployment

    def _trigger(self, deployment: Mapping[str, Any]) -> Any:
        """The wait for a rollback's rollout: the same settings, a fresh ``rollout_timeout``."""
        record = self._deployment_record(deployment, started_at=time.time())
        return self._rollout_settings().trigger(record, delete_on_kill=False)

    # -- after the rollout ------------------------------------------------------------------------------
    def execute_complete(self, context: Context, event: Mapping[str, Any], **kwargs: Any) -> Any:
        """The rollout wait ended in the triggerer: as :meth:`_rollout_ended`."""
        from airflow_k8s_ml.triggers.events import WorkloadEvent

        state: Mapping[str, Any] = _defer_state.restore(context, "execute_complete", kwargs)["state"]
        outcome = WorkloadEvent.from_payload(event)
        return self._rollout_ended(context, self._client(self.namespace), outcome, state)

    def _rollout_ended(
        self, context: Context, client: KubeClient, outcome: WorkloadEvent, state: Mapping[str, Any]
    ) -> Any:
        """The rollout wait ended (in the worker or the trigger, one event): smoke-test a success, roll
        back a failure or an expired deadline. A lost wait (``error``: a watch cut, the Deployment
        replaced) looks once more, by the same decision, before giving up."""
        from airflow_k8s_ml.operators._rollout_report import failure_reason, revision
        from airflow_k8s_ml.triggers.sync_wait import follow

        canary = state.get("canary") or {}
        if canary.get("phase") == "rollout":
            return self._canary_rolled_out(context, client, outcome, dict(state))
        if canary.get("phase") == "promote":  # the stable rollout of the new model ended: the canary goes
            from airflow_k8s_ml.operators import _canary

            _canary.remove(client, canary, self.log)
            self._record = None
        namespace = outcome.namespace or client.namespace
        if outcome.outcome == "succeeded":
            return self._after_rollout(context, client, namespace, state)
        deployment = client.get("apps/v1", "Deployment", self.name, namespace)
        if outcome.outcome == "error":
            again = None
            if deployment is not None:
                record = self._deployment_record(deployment, started_at=time.time())
                again = follow(client, record, self._rollout_settings(), self.log, [deployment])
            if again is not None and again.outcome == "succeeded":
                return self._after_rollout(context, client, namespace, state)
            if again is None or again.outcome != "failed":
                raise WorkloadFailed(
                    f"lost track of the rollout of {namespace}/{self.name}: {outcome.message}"
                )
            outcome = again
        failed_revision = revision(deployment)
        reason = failure_reason(outcome.outcome, failed_revision, outcome.workload_state, outcome.message)
        if deployment is not None:
            reason += self._pods_report(client, deployment, failed_revision)
        self._roll_back(context, client, deployment, reason, state, deadline=outcome.outcome == "deadline")

    def _pods_report(self, client: KubeClient, deployment: Mapping[str, Any], failed_revision: int) -> str:
        """What is wrong with the new revision's pods (crash loop, image pull...), with their last log lines
        in the task log: the failure message should say why, not only that the deadline passed."""
        from airflow_k8s_ml.kube.serving_ops import replica_sets_of
        from airflow_k8s_ml.manifests.serving import INFERENCE_CONTAINER
        from airflow_k8s_ml.operators._rollback import POD_TEMPLATE_HASH_LABEL, revision_hash
        from airflow_k8s_ml.operators._rollout_report import pod_trouble

        try:
            template_hash = revision_hash(replica_sets_of(client, deployment), failed_revision)
            if template_hash is None:
                return ""
            namespace = deployment["metadata"]["namespace"]
            pods = client.list("v1", "Pod", namespace, f"{POD_TEMPLATE_HASH_LABEL}={template_hash}")
            problems = []
            for pod in pods[:3]:
                name = pod["metadata"]["name"]
                trouble = pod_trouble(pod)
                if trouble is None:
                    continue
                last_line = ""
                tail = client.log_tail(name, namespace, INFERENCE_CONTAINER, lines=10, previous=True)
                tail = tail or client.log_tail(name, namespace, INFERENCE_CONTAINER, lines=10)
                for line in tail.splitlines():
                    self.log.error("[%s] %s", name, line)
                    last_line = line.strip() or last_line
                problems.append(
                    f"pod {name}: {trouble}" + (f"; last log line: {last_line[:300]}" if last_line else "")
                )
            return f"; {'; '.join(problems)}" if problems else ""
        except Exception as exc:  # diagnostics must never hide the real failure
            self.log.warning("could not read the pods of revision %d: %s", failed_revision, exc)
            return ""

    def _after_rollout(
        self, context: Context, client: KubeClient, namespace: str, state: Mapping[str, Any]
    ) -> dict[str, Any]:
        from airflow_k8s_ml.operators._rollout_report import revision
        from airflow_k8s_ml.operators._smoke_probe import SERVICE_PORT_NAME, run_smoke

        deployment = client.get("apps/v1", "Deployment", self.name, namespace)
        serving = revision(deployment)
        self.log.info("deployment %s/%s rolled out at revision %d", namespace, self.name, serving)
        report = run_smoke(client, namespace, self.name, self._smoke_settings(), self.log)
        if report.failure:
            reason = f"smoke test of revision {serving} failed: {report.failure}"
            self._roll_back(context, client, deployment, reason, state)
        from airflow_k8s_ml.kube.serving_ops import replica_sets_of, service_proxy_path
        from airflow_k8s_ml.operators._versions import history

        versions = history(deployment, replica_sets_of(client, deployment or {}))
        self._push(context, "model_history", versions)
        return {
            "deployment": self.name,
            "namespace": namespace,
            "revision": serving,
            "model_uri": state["model_uri"],
            "model": state.get("model_record"),
            "model_history": versions,
            "service": self.name,
            "service_url": service_proxy_path(namespace, self.name, SERVICE_PORT_NAME, "/"),
            "cluster_url": f"http://{self.name}.{namespace}.svc:{self.service_port}",
            "changes": dict(state["changes"]),
            "smoke": report.to_xcom(),
            "canary": (state.get("canary") or {}).get("verdict"),
        }

    def _smoke_settings(self) -> SmokeSettings:
        from airflow_k8s_ml.operators._smoke_probe import SmokeSettings

        return SmokeSettings(
            readiness_path=self.readiness_path,
            path=self.smoke_path,
            request=self.smoke_request,
            expected_status=self.expected_status,
            expected_response=self.expected_response,
            timeout=self.smoke_timeout,
        )

    # -- canary -----------------------------------------------------------------------------------------
    def _start_canary(
        self,
        context: Context,
        client: KubeClient,
        objects: list[dict[str, Any]],
        stable: Mapping[str, Any],
        settings: CanarySettings,
        state: dict[str, Any],
        rollout: WaitSettings,
    ) -> Any:
        """Apply everything but the stable Deployment, then the canary beside it (or adopt the one a crashed
        try started: the same object, so nothing is written), and follow the canary's rollout."""
        from airflow_k8s_ml.manifests.serving import canary_selector
        from airflow_k8s_ml.operators import _canary
        from airflow_k8s_ml.operators._rollout_report import revision

        new_deployment = next(obj for obj in objects if obj["kind"] == "Deployment")
        others = [obj for obj in objects if obj["kind"] != "Deployment"]
        changes, _ = self._apply(client, others, hpa_owns_replicas=False) if others else ({}, {})
        live, action, replicas = _canary.start(client, new_deployment, stable, settings)
        meta = live.get("metadata") or {}
        stable_pods = _canary.stable_replicas(stable)
        self.log.info(
            "canary %s/%s %s: %d pod(s) of model %s beside %d stable pod(s) of revision %d (%.0f%% of the "
            "ready pods; asked %d%%)",
            meta.get("namespace"),
            meta.get("name"),
            "adopted" if action == "unchanged" else action,
            replicas,
            state["model_uri"],
            stable_pods,
            revision(stable),
            100 * replicas / (replicas + stable_pods),
            settings.percent,
        )
        state["changes"] = {**changes, "Deployment": "unchanged", "canary": action}
        state["canary"] = {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "selector": canary_selector(self.name),
            "settings": settings.to_dict(),
            "replicas": replicas,
            "phase": "rollout",
        }
        window = _canary.recorded_window(live) if action == "unchanged" else None
        if window is not None:
            state["canary"]["window"] = window  # an earlier try's window: judged on, not opened again
        record = self._deployment_record(live, started_at=time.time())
        self._record = record  # a kill while the worker holds the canary removes it (the runner's on_kill)
        event = self._follow_rollout(client, live, record, rollout)
        if event is not None:
            return self._rollout_ended(context, client, event, state)
        _defer_state.stash(context, "execute_complete", {"state": state})
        self.defer(
            trigger=rollout.trigger(record, delete_on_kill=True),  # a kill removes the canary only
            method_name="execute_complete",
            kwargs={"state": state},
            timeout=self._deferral_timeout(context),
        )

    def _canary_rolled_out(
        self, context: Context, client: KubeClient, outcome: WorkloadEvent, state: dict[str, Any]
    ) -> Any:
        """The canary's rollout ended: smoke-test its pods, then open the analysis window (in the worker
        when it is shorter than ``defer_after``, else in the trigger)."""
        from airflow_k8s_ml.operators import _canary
        from airflow_k8s_ml.triggers.canary import CanaryTrigger

        canary = dict(state["canary"])
        from airflow_k8s_ml.status.canary import CanarySettings

        settings = CanarySettings(**canary["settings"])
        if outcome.outcome != "succeeded":
            return self._canary_decided(
                context, client, state, "rollback", f"the canary's rollout failed: {outcome.message}", None
            )
        failure = _canary.smoke_pods(client, canary, self.port, self._smoke_settings(), self.log)
        if failure:
            reason = f"smoke test failed: {failure}"
            return self._canary_decided(context, client, state, "rollback", reason, None)
        window = canary.pop("window", None)
        if window is not None:
            self.log.info(
                "canary analysis resumed: its window opened %.0fs ago (an earlier try), judged on from there",
                time.time() - window["started_at"],
            )
        else:
            try:
                window = _canary.open_window(client, canary, self.log)
            except Exception as exc:  # no custom metrics API, or not these metrics: it cannot be judged
                reason = f"the canary cannot be judged: {exc}"
                return self._canary_decided(context, client, state, "rollback", reason, None)
        canary.update(phase="analysis", **window)
        state = {**state, "canary": canary}
        self.log.info(
            "canary analysis: %gs, judged on the canary pods' http_requests_total and "
            "http_request_errors_total (max_error_rate %g, min_requests %d)",
            settings.analysis_seconds,
            settings.max_error_rate,
            settings.min_requests,
        )
        if settings.analysis_seconds <= self.defer_after:
            verdict = _canary.judge_in_worker(client, canary, settings, self.log)
            decided = (verdict.action, verdict.reason, verdict.to_dict())
            return self._canary_decided(context, client, state, *decided)
        trigger = CanaryTrigger(
            name=canary["name"],
            namespace=canary["namespace"],
            uid=canary["uid"] or "",
            selector=canary["selector"],
            canary=canary["settings"],
            baseline=canary["baseline"],
            started_at=canary["started_at"],
            kubernetes_conn_id=self.kubernetes_conn_id,
            poll_interval=_canary.analysis_poll_seconds(settings),
        )
        _defer_state.stash(context, "execute_canary_complete", {"state": state})
        self.defer(
            trigger=trigger,
            method_name="execute_canary_complete",
            kwargs={"state": state},
            timeout=self._deferral_timeout(context),
        )

    def execute_canary_complete(self, context: Context, event: Mapping[str, Any], **kwargs: Any) -> Any:
        """The analysis ended in the triggerer with a verdict: act on it."""
        state = dict(_defer_state.restore(context, "execute_canary_complete", kwargs)["state"])
        client = self._client(self.namespace)
        self._record = self._deployment_record(
            {"metadata": {k: state["canary"][k] for k in ("name", "namespace", "uid")}}, time.time()
        )
        return self._canary_decided(
            context, client, state, event["decision"], str(event.get("reason")), dict(event)
        )

    def _canary_decided(
        self,
        context: Context,
        client: KubeClient,
        state: dict[str, Any],
        decision: str,
        reason: str,
        verdict: Mapping[str, Any] | None,
    ) -> Any:
        """Promote (the stable Deployment takes the new model; the canary goes once it rolled out) or roll
        back (the canary goes, the stable Deployment was never touched, the task fails)."""
        from airflow_k8s_ml.operators import _canary
        from airflow_k8s_ml.operators._rollout_report import revision, served_model

        canary = dict(state["canary"])
        summary = {
            **dict(verdict or {"decision": decision, "reason": reason}),
            "canary": canary["name"],
            "model_uri": state["model_uri"],
            "stable_revision": state["previous_revision"],
            "settings": canary["settings"],
        }
        self._push(context, "canary", summary)
        namespace = canary["namespace"]
        if decision != "promote":
            self.log.error("canary of model %s rolled back: %s", state["model_uri"], reason)
            _canary.remove(client, canary, self.log)
            self._record = None
            stable = client.get("apps/v1", "Deployment", self.name, namespace)
            message = (
                f"canary of model {state['model_uri']} rolled back: {reason}; canary removed, revision "
                f"{revision(stable)} (model {served_model(stable)}) still serving, untouched"
            )
            if verdict is not None and verdict.get("rejected"):
                raise _canary.CanaryRejected(f"{message}; not retried: a retry would serve this model again")
            raise WorkloadFailed(message)
        self.log.info("canary of model %s promoted: %s", state["model_uri"], reason)
        args = self._arguments()
        objects = self._check(args._replace(model_uri=state["model_uri"]), self._run_key(context), namespace)
        from airflow_k8s_ml.operators._versions import with_model_record

        objects = with_model_record(objects, state["model_record"])
        changes, deployment = self._apply(client, objects, hpa_owns_replicas=args.autoscaling is not None)
        state = {
            **state,
            "changes": {**state.get("changes", {}), **changes},
            "canary": {**canary, "phase": "promote", "verdict": summary},
        }
        return self._await_rollout(context, client, deployment, self._rollout_settings(), state)

    # -- rollback ---------------------------------------------------------------------------------------
    def _roll_back(
        self,
        context: Context,
        client: KubeClient,
        deployment: Mapping[str, Any] | None,
        reason: str,
        state: Mapping[str, Any],
        *,
        deadline: bool = False,
    ) -> None:
        """Undo to the revision that served before this task, then defer until it is healthy (or fail now)."""
        from airflow_k8s_ml.kube.serving_ops import replica_sets_of
        from airflow_k8s_ml.operators._rollback import plan_rollback
        from airflow_k8s_ml.operators._rollout_report import revision, rollout_error, served_model

        previous = int(state.get("previous_revision") or 0)
        self.log.error("%s", reason)
        if deployment is None:
            raise rollout_error(f"{reason}; the Deployment is gone, nothing to roll back", deadline=deadline)
        if not self.rollback_on_failure:
            raise rollout_error(f"{reason}; not rolled back (rollback_on_failure=False)", deadline=deadline)
        if previous == 0:
            where = self._where(deployment)
            raise rollout_error(
                f"{reason}; nothing to roll back to: this was the first revision of deployment {where}, "
                "left in place for inspection",
                deadline=deadline,
            )
        plan = plan_rollback(deployment, replica_sets_of(client, deployment), to_revision=previous)
        if plan.action == "skip":
            raise rollout_error(
                f"{reason}; not rolled back: the pod template is still that of revision {previous}, "
                "which was serving before this task",
                deadline=deadline,
            )
        if plan.action == "impossible":
            raise rollout_error(
                f"{reason}; rollback to revision {previous} impossible: {plan.message}", deadline=deadline
            )
        meta = deployment.get("metadata") or {}
        client.patch(
            "apps/v1", "Deployment", meta["name"], meta.get("namespace"), plan.patch, patch_type="json"
        )
        self.log.warning(
            "rolled back deployment %s to the template of revision %d (ReplicaSet %s); waiting for it",
            self._where(deployment),
            previous,
            plan.replica_set,
        )
        rollback = {
            "reason": reason,
            "deadline": deadline,
            "failed_revision": revision(deployment),
            "failed_model_uri": served_model(deployment),
            "to_revision": previous,
        }
        kwargs = {"state": dict(state), "rollback": rollback}
        _defer_state.stash(context, "execute_rollback_complete", kwargs)
        self.defer(trigger=self._trigger(deployment), method_name="execute_rollback_complete", kwargs=kwargs)

    def execute_rollback_complete(
        self,
        context: Context,
        event: Mapping[str, Any],
        **kwargs: Any,
    ) -> None:
        """The rollback's wait ended: always fail, saying why and which revision serves now."""
        from airflow_k8s_ml.operators._rollout_report import (
            revision,
            rollback_message,
            rollout_error,
            served_model,
        )

        restored = _defer_state.restore(context, "execute_rollback_complete", kwargs)
        rollback: Mapping[str, Any] = restored["rollback"]
        from airflow_k8s_ml.triggers.events import WorkloadEvent

        outcome = WorkloadEvent.from_payload(event)
        client = self._client(self.namespace)
        deployment = client.get("apps/v1", "Deployment", self.name, outcome.namespace or client.namespace)
        serving, model = revision(deployment), served_model(deployment)
        healthy = outcome.outcome == "succeeded"
        summary = {
            "failed_revision": rollback.get("failed_revision"),
            "failed_model_uri": rollback.get("failed_model_uri"),
            "serving_revision": serving,
            "serving_model_uri": model,
            "rolled_back_to": rollback.get("to_revision"),
            "healthy": healthy,
            "reason": rollback.get("reason"),
        }
        self._push(context, "rollback", summary)
        message = rollback_message(
            rollback["reason"], rollback["to_revision"], serving, model, healthy, outcome.message
        )
        raise rollout_error(message, deadline=bool(rollback.get("deadline")))

    # -- small helpers ----------------------------------------------------------------------------------
    @staticmethod
    def _where(deployment: Mapping[str, Any]) -> str:
        meta = deployment.get("metadata") or {}
        return f"{meta.get('namespace')}/{meta.get('name')}"

    def _push(self, context: Context, key: str, value: Any) -> None:
        ti = context.get("ti")
        if ti is not None and hasattr(ti, "xcom_push"):
            ti.xcom_push(key=key, value=value)
