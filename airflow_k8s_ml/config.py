"""The provider's ``[airflow_k8s_ml]`` configuration options, declared once.

Why one table: the same declaration feeds ``get_provider_info()["config"]`` (so ``airflow config list`` and
the UI's configuration page show every option with its default and description) and the typed getters below
(so a reader never repeats a default). Values come from Airflow's configuration (``airflow.cfg`` or
``AIRFLOW__AIRFLOW_K8S_ML__<OPTION>``); without Airflow's config loaded the declared default applies.

Every option declared here is read: the links and the Training tab read theirs on use, both waits (the
triggerer's and the worker's) read the waiting ones once per wait, through one parse
(:meth:`WaitTimings.configured`). A constant becomes an option only together with the code that reads it.

Import-light: Airflow's ``conf`` is imported inside :func:`get`, never at module import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from airflow_k8s_ml.deadlines import DEFAULT_ADMISSION_TIMEOUT, DEFAULT_STARTUP_TIMEOUT

if TYPE_CHECKING:
    from airflow_k8s_ml.status.wait_report import Pace

__all__ = [
    "OPTIONS",
    "SECTION",
    "Option",
    "WaitTimings",
    "default_budgets",
    "get",
    "get_bool",
    "get_float",
    "get_int",
    "get_positive",
    "provider_config",
]

SECTION = "airflow_k8s_ml"


class Option(NamedTuple):
    """One option as the provider-info schema describes it (``default`` is always text, as in airflow.cfg)."""

    description: str
    type: str  # string | boolean | integer | float
    default: str
    example: str | None = None
    version_added: str = "0.1.0"


OPTIONS: dict[str, Option] = {
    "dashboard_url_template": Option(
        "URL of a cluster dashboard or log system for a training workload, shown as the 'Cluster dashboard' "
        "extra link on FineTuneJobOperator and PyTorchJobOperator. ``{namespace}``, ``{name}`` (the "
        "workload), ``{kind}`` and ``{uid}`` are replaced, URL-quoted. Empty: the link is hidden.",
        "string",
        "",
        "https://grafana.example.com/d/k8s-workload?var-namespace={namespace}&var-workload={name}",
    ),
    "service_proxy_url": Option(
        "Base URL of the 'Inference service' extra link, prefixed to the Service's API-server proxy path "
        "(``/api/v1/namespaces/<ns>/services/<name>:http/proxy/``). Empty: the API server of the task's "
        "``kubernetes_conn_id``. Set it to ``kubectl proxy``'s address or an authenticating gateway, since a "
        "browser holds no cluster credentials.",
        "string",
        "",
        "http://127.0.0.1:8001",
    ),
    "api_unreachable_timeout": Option(
        "Seconds a deferred wait tolerates an unreachable Kubernetes API server (no connection, or "
        "502/503/504) before it fails naming the endpoint and the last error; the retry adopts the workload "
        "if it still runs.",
        "float",
        "900",
        "300",
    ),
    "log_relay_max_line": Option(
        "Characters of one relayed pod log line kept in the task log while deferred (longer lines are cut).",
        "integer",
        "500",
    ),
    "log_relay_lines_per_second": Option(
        "Pod log lines a wait relays into the task log per second (a burst of ten seconds' worth at once); "
        "lines over it are counted and one line a second per pod says how many and how to read the whole "
        "log. It keeps a flooding pod from filling the triggerer's log channel, which blocks its loop.",
        "float",
        "200",
    ),
    "log_relay_drain_seconds": Option(
        "At most this many seconds the log relay waits for the replicas' last lines when the workload "
        "ends, before the trigger reports (it reports as soon as they are in).",
        "float",
        "10.0",
    ),
    "min_deferral_seconds": Option(
        "A deferred task's wait reports its workload's end no sooner than this many seconds after the task "
        "deferred. Why: Airflow 3.3 can fail a task whose trigger fires within seconds of the deferral: the "
        "deferring process's exit ('success') can reach the scheduler up to [workers] "
        "min_heartbeat_interval late, and drained after the resumed try was queued it reads as a task "
        "killed externally (apache/airflow#71580, #72716). Empty (the default): that interval plus 2 s "
        "(two scheduler loops), 7 s with Airflow's defaults. 0 turns the hold off.",
        "string",
        "",
        example="7",
    ),
    "trigger_heartbeat_seconds": Option(
        "A waiting trigger re-evaluates its workload at least this often even when the watch is quiet.",
        "float",
        "60",
    ),
    "trigger_refetch_seconds": Option(
        "How often a trigger re-reads a workload its watch does not show yet.",
        "float",
        "5",
    ),
    "default_admission_timeout": Option(
        "Seconds of ``admission_timeout`` (queued in Kueue, or pods unschedulable) for a task that sets "
        "none, so a pipeline written with the defaults cannot wait forever. Generous for a busy queue: "
        "6 hours. ``0`` or ``none``: no default budget (a task without the argument may then wait forever).",
        "string",
        f"{DEFAULT_ADMISSION_TIMEOUT.total_seconds():.0f}",
        "3600",
        version_added="0.2.0",
    ),
    "default_startup_timeout": Option(
        "Seconds of ``startup_timeout`` (pods scheduled but not running: image pulls, volumes, containers) "
        "for a task that sets none. Generous for a cold pull of a multi-gigabyte CUDA image: 30 minutes. "
        "``0`` or ``none``: no default budget.",
        "string",
        f"{DEFAULT_STARTUP_TIMEOUT.total_seconds():.0f}",
        "900",
        version_added="0.2.0",
    ),
    "still_waiting_seconds": Option(
        "A waiting task logs 'still waiting for ... since ...' when it said nothing for this many seconds.",
        "float",
        "300",
        "120",
        version_added="0.2.0",
    ),
    "fail_fast_stuck": Option(
        "Fail a waiting task at once (deleting its workload) when a pod is stuck on a cause waiting cannot "
        "heal: InvalidImageName, runAsNonRoot refused for the image, a Secret or ConfigMap still missing "
        "after ``missing_config_grace_seconds``. Off: such a pod is named in the log and the task waits "
        "for ``startup_timeout``.",
        "boolean",
        "True",
        version_added="0.2.0",
    ),
    "missing_config_grace_seconds": Option(
        "Seconds a Secret or ConfigMap a pod needs may take to appear after the pod was scheduled (another "
        "task or a secrets operator often creates it a moment later) before ``fail_fast_stuck`` fails the "
        "task.",
        "float",
        "120",
        version_added="0.2.0",
    ),
    "kueue_position_seconds": Option(
        "While a queued workload waits for Kueue admission, its queue position is asked of Kueue's "
        "visibility API on each change of its Workload and at least this often.",
        "float",
        "30",
    ),
    "ui_s3_max_workers": Option(
        "Parallel manifest reads of the Training tab (one listing plus one GET per new checkpoint).",
        "integer",
        "10",
    ),
    "ui_live_status": Option(
        "Whether the Training tab reads a running workload's live state and phase from Kubernetes (through "
        "the task's ``kubernetes_conn_id``); off: it shows what Airflow recorded.",
        "boolean",
        "True",
    ),
}


def provider_config() -> dict[str, Any]:
    """The ``config`` section of ``get_provider_info()`` (Airflow's provider_info.schema.json shape)."""
    return {
        SECTION: {
            "description": "Options of the airflow-k8s-ml provider (training, waiting, the UI plugin).",
            "options": {
                name: {
                    "description": option.description,
                    "version_added": option.version_added,
                    "type": option.type,
                    "example": option.example,
                    "default": option.default,
                }
                for name, option in OPTIONS.items()
            },
        }
    }


def get(name: str) -> str:
    """The option's value as text: Airflow's configuration, else the declared default."""
    default = OPTIONS[name].default
    try:
        from airflow.configuration import conf
    except ImportError:  # pragma: no cover - Airflow is a dependency; tools may run without its config
        return default
    value = conf.get(SECTION, name, fallback=default)
    return default if value is None else str(value)


def get_int(name: str) -> int:
    return int(get(name).strip() or OPTIONS[name].default)


def get_float(name: str) -> float:
    return float(get(name).strip() or OPTIONS[name].default)


def get_bool(name: str) -> bool:
    return get(name).strip().lower() in ("1", "true", "yes", "on")


def get_positive(name: str) -> float:
    """The option as a positive number of seconds (or characters); its declared default for a value that is
    not one (text, 0 or less) - the one rule for a bad waiting option, whichever wait reads it."""
    try:
        value = get_float(name)
    except (TypeError, ValueError):
        value = 0.0
    return value if value > 0 else float(OPTIONS[name].default)


def _declared(name: str) -> float:
    return float(OPTIONS[name].default)


class WaitTimings(NamedTuple):
    """The waiting options, read once per wait by the triggerer's wait and the worker's (each a positive
    value, else its declared default: :func:`get_positive`). Plain data, so tests shrink them."""

    heartbeat: float = _declared("trigger_heartbeat_seconds")
    refetch: float = _declared("trigger_refetch_seconds")
    log_drain: float = _declared("log_relay_drain_seconds")
    max_line: int = int(_declared("log_relay_max_line"))
    lines_per_second: float = _declared("log_relay_lines_per_second")
    position_refresh: float = _declared("kueue_position_seconds")
    unreachable: float = _declared("api_unreachable_timeout")
    still_waiting: float = _declared("still_waiting_seconds")
    fail_fast: bool = True
    config_grace: float = _declared("missing_config_grace_seconds")

    @classmethod
    def configured(cls) -> WaitTimings:
        return cls(
            heartbeat=get_positive("trigger_heartbeat_seconds"),
            refetch=get_positive("trigger_refetch_seconds"),
            log_drain=get_positive("log_relay_drain_seconds"),
            max_line=int(get_positive("log_relay_max_line")),
            lines_per_second=get_positive("log_relay_lines_per_second"),
            position_refresh=get_positive("kueue_position_seconds"),
            unreachable=get_positive("api_unreachable_timeout"),
            still_waiting=get_positive("still_waiting_seconds"),
            fail_fast=get_bool("fail_fast_stuck"),
            config_grace=get_positive("missing_config_grace_seconds"),
        )

    def pace(self) -> Pace:
        """What the wait report needs of these options (:class:`~airflow_k8s_ml.status.wait_report.Pace`):
        the "still waiting" line's period, the early-failure rules; a stuck pod's events are read at most
        every ``refetch`` seconds."""
        from airflow_k8s_ml.status.stuck import StuckRules
        from airflow_k8s_ml.status.wait_report import Pace

        rules = StuckRules(fail_fast=self.fail_fast, config_grace=self.config_grace)
        return Pace(still_every=self.still_waiting, events_every=self.refetch, stuck=rules)


def default_budgets() -> dict[str, float | None]:
    """The ``admission_timeout`` and ``startup_timeout`` (seconds) a task gets when it sets none; None: the
    option says no default (``0``, ``none``). A value that is not a number: the declared default."""
    out: dict[str, float | None] = {}
    for name in ("admission_timeout", "startup_timeout"):
        option = f"default_{name}"
        text = get(option).strip().lower()
        if text in ("", "0", "none"):
            out[name] = None
            continue
        try:
            value = float(text)
        except ValueError:
            value = float(OPTIONS[option].default)
        out[name] = value if value > 0 else None
    return out
