"""Pod objects as the API server returns them, shared by the deadline and wait-decision tests."""

from __future__ import annotations

from typing import Any

GPU_MESSAGE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def unschedulable_pod() -> dict[str, Any]:
    """A pod the scheduler could not place (created at T0 = 2023-11-14T22:13:20Z)."""
    return {
        "metadata": {"name": "ft-abc", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"containers": [{"name": "main"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": GPU_MESSAGE}
            ],
        },
    }
