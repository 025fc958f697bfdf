"""The Training tab and the approved-checkpoint page as HTML (pure): static markup, inline SVG, no script.

Why no script: the page needs none, so the app's Content-Security-Policy can forbid every script (Airflow
3.3's iframe sandbox, ``allow-scripts allow-same-origin allow-forms allow-downloads``, does not; escaping
every value from a manifest or a task is the first defence). A run in progress refreshes itself with
``<meta http-equiv="refresh">`` (plain navigation), so the curve grows while the task is deferred.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from airflow_k8s_ml.checkpoints.manifest import parse_step_folder
from airflow_k8s_ml.ui.svg import Marker, render_chart
from airflow_k8s_ml.ui.view import TrainingView

__all__ = ["chart_markers", "checkpoint_page", "duration", "training_page"]

#: Seconds between reloads of a tab whose run is in progress.
REFRESH_SECONDS = 15

_STYLE = """
body{font-family:system-ui,sans-serif;font-size:13px;color:#222;margin:12px 16px;background:#fff}
h1{font-size:16px;margin:0 0 8px} h2{font-size:14px;margin:18px 0 6px}
table{border-collapse:collapse;margin:4px 0} td,th{padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600} .mono{font-family:ui-monospace,monospace;font-size:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:9px;background:#eee}
.failed{background:#fde2e1;color:#8a1c14} .finished{background:#e3f4e3;color:#1d5e1d}
.in-progress{background:#e4eefa;color:#174a8c} .note{color:#8a5a00} .stopped{color:#8a1c14;font-weight:600}
"""


def duration(seconds: float | None) -> str:
    """``1h 02m``, ``4m 05s``, ``12s``; ``expired 3m 10s ago`` for a negative left-over."""
    if seconds is None:
        return "-"
    if seconds < 0:
        return f"expired {duration(-seconds)} ago"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def chart_markers(view: TrainingView) -> list[Marker]:
    """Newest complete checkpoint, the resume point (when it is a step of this base), where a failed run
    stopped, and the step folders that are not (yet) checkpoints."""
    markers: list[Marker] = []
    if view.latest is not None:
        label = "stopped" if view.progress == "failed" else "newest complete"
        markers.append((view.latest.step, label, "#d62728" if view.progress == "failed" else "#2ca02c"))
    resume = _resume_step(view)
    if resume is not None:
        markers.append((resume, "resumed from", "#1f77b4"))
    markers += [(p.step, "incomplete", "#999") for p in view.ignored]
    return markers


def _resume_step(view: TrainingView) -> int | None:
    if not view.resume_from or not view.checkpoint_uri:
        return None
    base = view.checkpoint_uri.rstrip("/") + "/"
    if not view.resume_from.startswith(base):
        return None
    return parse_step_folder(view.resume_from[len(base) :].strip("/"))


def _rows(rows: Iterable[tuple[str, str]]) -> str:
    return "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows)


def _metrics(metrics: Mapping[str, float]) -> str:
    return ", ".join(f"{escape(k)}={v:.6g}" for k, v in metrics.items()) or "-"


def _workload_rows(view: TrainingView) -> list[tuple[str, str]]:
    rows = [("Task", f"{escape(view.task_id)} <span class='mono'>({escape(view.operator or '?')})</span>")]
    rows.append(("Task state", f"{escape(view.ti_state or 'none')}, try {view.try_number}"))
    workload = view.workload
    if workload:
        rows.append(
            (
                "Workload",
                f"<span class='mono'>{escape(str(workload.get('kind')))} "
                f"{escape(str(workload.get('namespace')))}/{escape(str(workload.get('name')))}</span>",
            )
        )
        rows.append(("Attempt", escape(str(workload.get("attempt") or "-"))))
    else:
        rows.append(("Workload", "not submitted yet"))
    state = view.workload_state
    if state:
        text = escape(str(state.get("phase")))
        if state.get("reason"):
            text += f" ({escape(str(state['reason']))})"
        if state.get("message"):
            text += f": {escape(str(state['message']))}"
        rows.append(("Workload state", f"{text} <span class='note'>[{escape(view.state_source)}]</span>"))
    if view.live_phase:
        rows.append(("Phase", escape(view.live_phase)))
    if view.disruptions is not None:
        rows.append(("Disruptions", _disruption_text(view.disruptions)))
    return rows


def _disruption_text(figures: Mapping[str, Any]) -> str:
    """``2 (lost 1m 30s): pod-a EvictionByEvictionAPI, pod-b TerminationByKubelet``: each replaced and
    resumed from its newest checkpoint; lost: redone work (docs/checkpoints.md)."""
    count = int(figures.get("count") or 0)
    if not count:
        return "none"
    lost = figures.get("lost_seconds")
    text = f"{count} (lost {duration(lost)})" if lost is not None else str(count)
    pods = [f"{p.get('pod')} {p.get('reason')}" for p in figures.get("pods") or ()]
    return escape(text + (": " + ", ".join(pods) if pods else ""))


def _checkpoint_rows(view: TrainingView) -> list[tuple[str, str]]:
    rows = [("Checkpoints", f"<span class='mono'>{escape(view.checkpoint_uri or 'unknown')}</span>")]
    rows.append(("Committed", str(len(view.checkpoints))))
    latest = view.latest
    if latest is not None:
        rows.append(
            (
                "Newest complete",
                f"step {latest.step} <span class='mono'>{escape(latest.uri)}</span> "
                f"({escape(latest.created_at or '?')}): {_metrics(latest.metrics)}",
            )
        )
    else:
        rows.append(("Newest complete", "none yet"))
    rows.append(
        ("Resume point", f"<span class='mono'>{escape(view.resume_from or 'none (fresh start)')}</span>")
    )
    for p in view.ignored:
        rows.append((f"Ignored step {p.step}", escape(p.problem or "incomplete")))
    return rows


def training_page(view: TrainingView) -> str:
    """The whole tab for one task instance."""
    head = f"<style>{_STYLE}</style>"
    if view.progress == "in progress":
        head += f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
    body = [
        f"<h1>Training <span class='badge {view.progress.replace(' ', '-')}'>"
        f"{escape(view.progress)}</span></h1>"
    ]
    if not view.is_training:
        body.append(
            f"<p>{escape(view.task_id)} is a {escape(view.operator or 'task')}, not a training task "
            "(FineTuneJobOperator, PyTorchJobOperator, TrainJobOperator): nothing to chart.</p>"
        )
        return _document(head, body)
    if view.stopped:
        body.append(f"<p class='stopped'>{escape(view.stopped)}</p>")
    body.append(f"<table>{_rows(_workload_rows(view))}</table>")
    if view.deadlines:
        rows = "".join(
            f"<tr><td>{escape(d.name)}</td><td>{duration(d.budget_seconds)}</td>"
            f"<td>{duration(d.left_seconds)}</td><td class='note'>{escape(d.note)}</td></tr>"
            for d in view.deadlines
        )
        body.append(
            f"<h2>Deadlines</h2><table><tr><th>budget</th><th>size</th><th>left</th><th></th></tr>{rows}</table>"
        )
    body.append("<h2>Metrics per checkpoint</h2>")
    body.append(render_chart(view.series, chart_markers(view), f"{view.task_id} training metrics"))
    body.append(f"<table>{_rows(_checkpoint_rows(view))}</table>")
    body += [f"<p class='note'>{escape(note)}</p>" for note in view.notes]
    if view.checkpoints:
        names = view.columns
        header = "".join(f"<th>{escape(n)}</th>" for n in names)
        lines = "".join(
            f"<tr><td>{p.step}</td><td>{escape(p.created_at or '-')}</td>"
            + "".join(f"<td>{p.metrics[n]:.6g}</td>" if n in p.metrics else "<td>-</td>" for n in names)
            + "</tr>"
            for p in reversed(view.checkpoints)
        )
        body.append(
            "<h2>Committed checkpoints</h2>"
            f"<table><tr><th>step</th><th>created</th>{header}</tr>{lines}</table>"
        )
    return _document(head, body)


def checkpoint_page(task: Mapping[str, str], approved: Mapping[str, Any] | None) -> str:
    """The approved-checkpoint page of a CheckpointCheckOperator task (its XCom, as the gate pushed it)."""
    head = f"<style>{_STYLE}</style>"
    body = [f"<h1>Approved checkpoint of {escape(task['task_id'])}</h1>"]
    if not approved:
        body.append("<p>This gate has not approved a checkpoint (no result).</p>")
        return _document(head, body)
    rows = [
        ("URI", f"<span class='mono'>{escape(str(approved.get('uri')))}</span>"),
        ("Step", escape(str(approved.get("step")))),
        ("Created", escape(str(approved.get("created_at") or "-"))),
        ("Metrics", _metrics(approved.get("metrics") or {})),
        ("Run", f"{escape(task['dag_id'])} / {escape(task['run_id'])}"),
    ]
    if approved.get("note"):
        rows.append(("Note", f"<span class='note'>{escape(str(approved['note']))}</span>"))
    body.append(f"<table>{_rows(rows)}</table>")
    return _document(head, body)


def _document(head: str, body: list[str]) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{head}</head><body>{''.join(body)}</body></html>"
    )
