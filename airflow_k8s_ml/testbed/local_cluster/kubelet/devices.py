"""GPU device assignment (the kubelet's device manager): concrete indices per pod, for CUDA_VISIBLE_DEVICES.

The scheduler only counts GPUs; which physical indices a pod gets is the node's business, as upstream.
"""

from __future__ import annotations


class GpuAllocator:
    def __init__(self, count: int) -> None:
        self._count = count
        self._assigned: dict[str, list[int]] = {}

    def allocate(self, uid: str, wanted: int) -> list[int] | None:
        """The lowest free indices, or None while too few are free (a terminating pod still holds some)."""
        if uid in self._assigned:
            return self._assigned[uid]
        taken = {i for indices in self._assigned.values() for i in indices}
        free = [i for i in range(self._count) if i not in taken]
        if len(free) < wanted:
            return None
        self._assigned[uid] = free[:wanted]
        return self._assigned[uid]

    def release(self, uid: str) -> None:
        self._assigned.pop(uid, None)
