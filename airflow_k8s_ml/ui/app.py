"""The plugin's FastAPI app, mounted by the api-server under :data:`~airflow_k8s_ml.plugin_paths.URL_PREFIX`.

Auth is Airflow's own: every route depends on ``requires_access_dag`` from
``airflow.api_fastapi.core_api.security`` for the task instance *and* its XComs (the tab shows the task's
result), with the ``dag_id`` taken from the query - the same check, the same auth manager and the same
401/403 answers as the REST API's task-instance endpoints. The session cookie the UI sets (``_token``) or a
bearer token both work, since the dependency reads either.

The data is read on request, in the api-server: the task instance's facts from the metadata DB, the
checkpoints through the task's own ``aws_conn_id`` (rendered fields), and - for a waiting workload - its live
state from Kubernetes through the trigger's ``kubernetes_conn_id``, concurrently with the checkpoints.
A ``Server-Timing`` header reports where the time went.

Security headers on every answer (:data:`SECURITY_HEADERS`): Airflow 3.3 draws the tab in an iframe sandboxed
with ``allow-scripts allow-same-origin``, which is no sandbox for a same-origin page, so escaping is the first
defence and a Content-Security-Policy that runs no script at all is the second (the tab needs none: inline
CSS, inline SVG, ``<meta http-equiv="refresh">``). ``nosniff`` stops a browser from reading a JSON or SVG
answer as anything else. No OpenAPI document is served: the tab needs none, and it would be the one route
answering without authentication.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Annotated

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from airflow_k8s_ml import config
from airflow_k8s_ml.ui.facts import TaskFacts, read_facts
from airflow_k8s_ml.ui.history import History, HistoryReader
from airflow_k8s_ml.ui.page import chart_markers, checkpoint_page, training_page
from airflow_k8s_ml.ui.svg import render_chart
from airflow_k8s_ml.ui.view import TRAINING_OPERATORS, TrainingView, build_view

if TYPE_CHECKING:
    from airflow_k8s_ml.ui.live import LiveStatus

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def _map_index(value: str | None) -> int:
    """``map_index`` as the UI fills the external view's URL: ``{MAP_INDEX}`` stays literal for a task that
    is not mapped, so anything but a number means -1."""
    try:
        return int(value) if value not in (None, "") else -1
    except ValueError:
        return -1


class _Services:
    """Per-process state: the checkpoint reader (manifest cache, thread pool) and the live-status pool."""

    def __init__(self) -> None:
        self.reader = HistoryReader(max_workers=config.get_int("ui_s3_max_workers"))
        self.side = ThreadPoolExecutor(max_workers=4, thread_name_prefix="training-tab")

    def close(self) -> None:
        self.reader.close()
        self.side.shutdown(wait=False, cancel_futures=True)


def _read_history(services: _Services, facts: TaskFacts) -> tuple[History | None, str | None]:
    uri = facts.rendered.get("checkpoint_uri")
    if not isinstance(uri, str) or not uri.strip():
        return None, "No checkpoint_uri recorded for this task (rendered fields missing): nothing to chart."
    # The task's own connection; ``None`` (boto3's default credential chain) stays None. A task rendered
    # before ``aws_conn_id`` became a template field has no entry: the operators' default then applies.
    conn = facts.rendered.get("aws_conn_id", "aws_default")
    conn_id = conn.strip() if isinstance(conn, str) and conn.strip() not in ("", "None") else None
    try:
        return services.reader.read(uri.strip(), conn_id), None
    except Exception as exc:
        log.warning("Training tab: reading checkpoints under %s failed: %s", uri, exc)
        return None, f"Could not read the checkpoints under {uri}: {exc}"


def _live(facts: TaskFacts) -> LiveStatus | None:
    """The live status of a deferred workload, when enabled and the trigger's kwargs name it."""
    trigger, record = facts.trigger, facts.record or {}
    waiting = facts.state in ("deferred", "running", "queued", "scheduled")
    if not waiting or not trigger or not config.get_bool("ui_live_status") or not record.get("name"):
        return None
    from airflow_k8s_ml.ui.live import read_live

    return read_live(
        str(trigger.get("kubernetes_conn_id") or "kubernetes_default"),
        str(record.get("api_version") or trigger.get("api_version") or ""),
        str(record.get("kind")),
        str(record.get("name")),
        str(record.get("namespace")),
    )


def _training_view(services: _Services, facts: TaskFacts) -> tuple[TrainingView, str]:
    notes: list[str] = []
    timings: list[str] = []
    history: History | None = None
    live = None
    if facts.operator in TRAINING_OPERATORS:
        started = time.perf_counter()
        pending: Future[LiveStatus | None] = services.side.submit(_live, facts)
        history, problem = _read_history(services, facts)
        timings.append(f"checkpoints;dur={(time.perf_counter() - started) * 1000:.1f}")
        if problem:
            notes.append(problem)
        try:
            live = pending.result(timeout=5.0)
        except Exception as exc:
            notes.append(
                f"Live status from Kubernetes unavailable ({type(exc).__name__}: {exc}); "
                "showing what Airflow recorded."
            )
        timings.append(f"live;dur={(time.perf_counter() - started) * 1000:.1f}")
    view = build_view(facts, history, now=time.time(), live=live, notes=tuple(notes))
    return view, ", ".join(timings)


def facts_of(
    session: SessionDep,
    dag_id: Annotated[str, Query()],
    run_id: Annotated[str, Query()],
    task_id: Annotated[str, Query()],
    map_index: Annotated[str | None, Query()] = None,
) -> tuple[TaskFacts, float]:
    """The addressed task instance's facts and the seconds reading them took; 404 if there is none."""
    started = time.perf_counter()
    facts = read_facts(session, dag_id, run_id, task_id, _map_index(map_index))
    if facts is None:
        raise HTTPException(404, f"no task instance {dag_id}/{run_id}/{task_id}[{map_index}]")
    return facts, time.perf_counter() - started


FactsDep = Annotated[tuple[TaskFacts, float], Depends(facts_of)]
#: Reading the tab needs what reading the task instance and its XComs needs in Airflow's own API.
READABLE = [
    Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE)),
    Depends(requires_access_dag("GET", DagAccessEntity.XCOM)),
]


def _headers(found: tuple[TaskFacts, float], extra: str) -> dict[str, str]:
    value = f"facts;dur={found[1] * 1000:.1f}" + (f", {extra}" if extra else "")
    return {"Server-Timing": value, "Cache-Control": "no-store"}


#: Sent with every answer of the plugin's app (see the module's docstring).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
}


def create_app() -> FastAPI:
    """The app the plugin mounts; importing this module is what pulls FastAPI into the process."""
    services = _Services()
    app = FastAPI(
        title="airflow-k8s-ml UI",
        description="The Training tab of training task instances and the approved-checkpoint page.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.services = services

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.get("/training", response_class=HTMLResponse, dependencies=READABLE)
    def training(found: FactsDep) -> HTMLResponse:
        view, timing = _training_view(services, found[0])
        return HTMLResponse(training_page(view), headers=_headers(found, timing))

    @app.get("/training/chart.svg", dependencies=READABLE)
    def training_chart(found: FactsDep) -> Response:
        view, timing = _training_view(services, found[0])
        svg = render_chart(view.series, chart_markers(view), f"{view.task_id} training metrics")
        return Response(svg, media_type="image/svg+xml", headers=_headers(found, timing))

    @app.get("/training/data.json", dependencies=READABLE)
    def training_data(found: FactsDep) -> JSONResponse:
        view, timing = _training_view(services, found[0])
        return JSONResponse(view.to_json(), headers=_headers(found, timing))

    @app.get("/checkpoint", response_class=HTMLResponse, dependencies=READABLE)
    def approved_checkpoint(found: FactsDep) -> HTMLResponse:
        facts = found[0]
        task = {"dag_id": facts.dag_id, "run_id": facts.run_id, "task_id": facts.task_id}
        approved = facts.result if isinstance(facts.result, dict) else None
        return HTMLResponse(checkpoint_page(task, approved), headers=_headers(found, ""))

    return app
