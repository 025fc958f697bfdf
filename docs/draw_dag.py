"""Draw docs/dag.png: the tasks of dags/nightly_finetune.py as boxes and arrows.

Run ``.venv/bin/python docs/draw_dag.py`` after changing the DAG's shape. The picture is drawn from the list
below, not from the DAG file, so it needs only matplotlib (no Airflow import); keep the two in step.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

OUT = Path(__file__).resolve().parent / "dag.png"

#: task_id -> (x, y, operator, what it does, fill colour)
TASKS: dict[str, tuple[float, float, str, str, str]] = {
    "choose_training_mode": (1.2, 2.0, "BranchPythonOperator", "Param mode", "#eeeeee"),
    "fine_tune_job": (4.9, 3.4, "FineTuneJobOperator", "batch/v1 Job", "#dbe9f6"),
    "fine_tune_pytorchjob": (4.9, 2.0, "PyTorchJobOperator", "master + N workers", "#dbe9f6"),
    "fine_tune_trainjob": (4.9, 0.6, "TrainJobOperator", "Trainer v2, N nodes", "#dbe9f6"),
    "checkpoint_gate": (8.0, 2.0, "CheckpointCheckOperator", "val_accuracy >= threshold", "#e8f4e8"),
    "should_deploy": (10.8, 2.0, "ShortCircuitOperator", "Param deploy", "#eeeeee"),
    "deploy_model": (14.2, 2.0, "InferenceDeploymentOperator", "rollout, smoke, rollback", "#e3f0e8"),
    "batch_inference": (17.0, 2.0, "BatchInferenceCronJobOperator", "CronJob + run now", "#efe6f5"),
}
#: (upstream, downstream, label on the arrow)
EDGES: list[tuple[str, str, str]] = [
    ("choose_training_mode", "fine_tune_job", "mode=job"),
    ("choose_training_mode", "fine_tune_pytorchjob", "mode=pytorchjob"),
    ("choose_training_mode", "fine_tune_trainjob", "mode=trainjob"),
    ("fine_tune_job", "checkpoint_gate", ""),
    ("fine_tune_pytorchjob", "checkpoint_gate", ""),
    ("fine_tune_trainjob", "checkpoint_gate", ""),
    ("checkpoint_gate", "should_deploy", ""),
    ("should_deploy", "deploy_model", "deploy=true"),
    ("deploy_model", "batch_inference", ""),
]
BOX_W, BOX_H = 2.3, 1.05


def draw(out: Path = OUT) -> Path:
    fig, ax = plt.subplots(figsize=(16.5, 4.6), dpi=110)
    ax.set_xlim(-0.1, 18.3)
    ax.set_ylim(0.0, 4.15)
    ax.axis("off")
    for task_id, (x, y, operator, what, colour) in TASKS.items():
        box = FancyBboxPatch(
            (x - BOX_W / 2, y - BOX_H / 2),
            BOX_W,
            BOX_H,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=colour,
            edgecolor="#444444",
            linewidth=1.2,
        )
        ax.add_patch(box)
        ax.text(x, y + 0.22, task_id, ha="center", va="center", fontsize=10.5, fontweight="bold")
        ax.text(x, y - 0.06, operator, ha="center", va="center", fontsize=8.2, color="#333333")
        ax.text(x, y - 0.31, what, ha="center", va="center", fontsize=8.2, color="#555555", style="italic")
    for upstream, downstream, label in EDGES:
        x0, y0 = TASKS[upstream][:2]
        x1, y1 = TASKS[downstream][:2]
        arrow = FancyArrowPatch(
            (x0 + BOX_W / 2, y0),
            (x1 - BOX_W / 2, y1),
            arrowstyle="-|>",
            mutation_scale=14,
            linewidth=1.3,
            color="#444444",
            shrinkA=2,
            shrinkB=2,
        )
        ax.add_patch(arrow)
        if label:
            # Straight arrows: label above the middle; branches: left of the arrowhead, at the target's y.
            start, end = x0 + BOX_W / 2, x1 - BOX_W / 2
            horizontal = y1 == y0
            ax.text(
                (start + end) / 2 if horizontal else end - 0.22,
                y0 + 0.25 if horizontal else y1,
                label,
                ha="center" if horizontal else "right",
                va="center",
                fontsize=8.5,
                color="#1f4e79",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
            )
    ax.text(
        8.0,
        1.28,
        "trigger_rule: none_failed_min_one_success",
        ha="center",
        va="center",
        fontsize=7.8,
        color="#666666",
    )
    ax.set_title("nightly_finetune  (schedule 30 1 * * *, Europe/Amsterdam)", fontsize=12, loc="left", pad=6)
    fig.tight_layout()
    fig.savefig(out, facecolor="white")
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(draw())
