"""One pod's figure for one metric, as the metrics APIs give it and the HPA reads it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """``value`` in the metric's unit (cpu: cores, memory: bytes, custom: its own), measured over the
    ``window`` seconds that end at ``at`` (the HPA ignores a cpu figure whose window overlaps the moment
    the pod became Ready, as upstream does for a starting pod)."""

    value: float
    at: float
    window: float
