"""The training curve as server-side SVG (pure): no script, no dependency, readable in a sandboxed iframe.

Metrics are grouped into panels that share a scale - the losses together, accuracies together, anything else
alone - over one x axis (the checkpoint's step). Every committed checkpoint is one ``<circle>`` per metric
carrying ``data-metric``/``data-step``/``data-value`` (what a test or a user's script can read back) and a
``<title>`` (the browser's tooltip). Markers show the newest complete checkpoint, the resume point and, for a
failed run, where training stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from html import escape

__all__ = ["Marker", "panels", "render_chart"]

WIDTH = 760
PANEL_HEIGHT = 170
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 150, 22, 30
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

Series = dict[str, list[tuple[int, float]]]
Marker = tuple[int, str, str]  # (step, label, color)


def panels(series: Series) -> list[tuple[str, list[str]]]:
    """(panel title, metric names): losses share a panel, accuracies share one, the rest get their own."""
    groups: dict[str, list[str]] = {}
    for name in series:
        lowered = name.lower()
        key = "loss" if "loss" in lowered else "accuracy" if "acc" in lowered else name
        groups.setdefault(key, []).append(name)
    return sorted(groups.items(), key=lambda item: (item[0] not in ("loss", "accuracy"), item[0]))


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    if high <= low:
        return [low]
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def _fmt(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 10000:
        return f"{value:.4g}"
    return f"{value:.2e}"


def _bounds(values: Iterable[float]) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if high == low:
        pad = abs(low) * 0.05 or 0.5
        return low - pad, high + pad
    pad = (high - low) * 0.06
    return low - pad, high + pad


def render_chart(series: Series, markers: Sequence[Marker] = (), title: str = "") -> str:
    """One SVG document with a panel per metric group; a note instead of axes when nothing is committed."""
    groups = panels(series)
    if not groups:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="60" role="img" '
            f'class="training-chart" data-points="0"><text x="10" y="35" font-size="14" fill="#555">'
            "No committed checkpoint with metrics yet.</text></svg>"
        )
    steps = sorted({step for pairs in series.values() for step, _ in pairs} | {m[0] for m in markers})
    x_low, x_high = (steps[0], steps[-1]) if steps[0] != steps[-1] else (steps[0] - 1, steps[0] + 1)
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT

    def x_of(step: float) -> float:
        return MARGIN_LEFT + (step - x_low) / (x_high - x_low) * plot_w

    total = sum(len(pairs) for pairs in series.values())
    height = len(groups) * PANEL_HEIGHT
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" class="training-chart" data-points="{total}" '
        f'font-family="system-ui, sans-serif" font-size="11">',
        f"<title>{escape(title or 'Training metrics per checkpoint')}</title>",
    ]
    color_of = {name: COLORS[i % len(COLORS)] for i, name in enumerate(series)}
    for index, (group, names) in enumerate(groups):
        top = index * PANEL_HEIGHT
        out.append(_panel(series, group, names, top, x_of, steps, markers, color_of))
    out.append("</svg>")
    return "\n".join(out)


def _panel(
    series: Series,
    group: str,
    names: list[str],
    top: float,
    x_of: Callable[[float], float],
    steps: list[int],
    markers: Sequence[Marker],
    color_of: dict[str, str],
) -> str:
    y0, y1 = top + MARGIN_TOP, top + PANEL_HEIGHT - MARGIN_BOTTOM
    low, high = _bounds(v for name in names for _, v in series[name])

    def y_of(value: float) -> float:
        return y1 - (value - low) / (high - low) * (y1 - y0)

    x_left, x_right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    parts = [
        f'<g class="panel" data-panel="{escape(group)}">',
        f'<text x="{x_left}" y="{top + 14}" font-weight="600" font-size="12">{escape(group)}</text>',
        f'<rect x="{x_left}" y="{y0}" width="{x_right - x_left}" height="{y1 - y0}" '
        'fill="none" stroke="#ccc"/>',
    ]
    for tick in _ticks(low, high):
        y = y_of(tick)
        parts.append(f'<line x1="{x_left}" x2="{x_right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(
            f'<text x="{x_left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{_fmt(tick)}</text>'
        )
    every = max(1, math.ceil(len(steps) / 12))
    for step in steps[::every]:
        x = x_of(step)
        parts.append(f'<text x="{x:.1f}" y="{y1 + 14}" text-anchor="middle" fill="#555">{step}</text>')
    for step, label, color in markers:
        x = x_of(step)
        parts.append(
            f'<line class="marker" data-marker="{escape(label)}" data-step="{step}" '
            f'x1="{x:.1f}" x2="{x:.1f}" '
            f'y1="{y0}" y2="{y1}" stroke="{color}" stroke-dasharray="4 3"/>'
        )
    for row, name in enumerate(names):
        color = color_of[name]
        pairs = series[name]
        coords = " ".join(f"{x_of(s):.1f},{y_of(v):.1f}" for s, v in pairs)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        for step, value in pairs:
            parts.append(
                f'<circle class="point" data-metric="{escape(name)}" data-step="{step}" '
                f'data-value="{value!r}" '
                f'cx="{x_of(step):.1f}" cy="{y_of(value):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(name)} at step {step}: {value:.6g}</title></circle>"
            )
        legend_y = y0 + 12 + row * 16
        parts.append(
            f'<rect x="{x_right + 12}" y="{legend_y - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x_right + 28}" y="{legend_y + 1}">{escape(name)}</text>'
        )
    parts.append(f'<text x="{x_right}" y="{y1 + 26}" text-anchor="end" fill="#777">step</text>')
    parts.append("</g>")
    return "\n".join(parts)
