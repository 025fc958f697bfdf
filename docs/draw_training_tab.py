"""Draw docs/training-tab.svg: the Training tab's chart for a failed run, from real manifests.

Run ``.venv/bin/python docs/draw_training_tab.py`` after changing ``airflow_k8s_ml/ui/svg.py``. Six
checkpoints are committed with the real writer to a temporary file:// base (metrics shaped like the
reference workload's), a seventh is left half-written, and the tab's own view and SVG code draw it - the
picture is what the tab serves for that run, minus the surrounding tables.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from airflow_k8s_ml.checkpoints import CheckpointWriter
from airflow_k8s_ml.ui.facts import TaskFacts
from airflow_k8s_ml.ui.history import HistoryReader
from airflow_k8s_ml.ui.page import chart_markers
from airflow_k8s_ml.ui.svg import render_chart
from airflow_k8s_ml.ui.view import build_view

OUT = Path(__file__).resolve().parent / "training-tab.svg"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = f"file://{tmp}/run"
        writer = CheckpointWriter(base)
        for step in range(1, 7):
            metrics = {
                "train_loss": 1.9 * math.exp(-0.45 * step) + 0.12,
                "val_loss": 2.0 * math.exp(-0.4 * step) + 0.2,
                "val_accuracy": 0.97 - 0.6 * math.exp(-0.55 * step),
                "epoch": step,
            }
            writer.commit(step, {"model.bin": b"m" * step}, metrics)
        (Path(tmp) / "run" / "step-7").mkdir()
        (Path(tmp) / "run" / "step-7" / "model.bin").write_bytes(b"partial")
        facts = TaskFacts(
            dag_id="nightly_finetune",
            run_id="scheduled__2026-12-01T00:30:00+00:00",
            task_id="fine_tune_job",
            map_index=-1,
            operator="FineTuneJobOperator",
            state="failed",
            try_number=1,
            rendered={"checkpoint_uri": base},
            result=None,
        )
        view = build_view(facts, HistoryReader().read(base), now=0.0)
        svg = render_chart(view.series, chart_markers(view), "fine_tune_job training metrics")
        OUT.write_text(svg + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
