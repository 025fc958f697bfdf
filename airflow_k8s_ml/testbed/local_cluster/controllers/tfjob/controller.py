"""The kubeflow.org/v1 TFJob controller (training-operator release-1.9), served natively.

The common job controller of :mod:`..pytorchjob` (watches, pods and Services with upstream's events,
status writes, TTL) with TFJob's resource, admission and :data:`TFJOB_FLAVOR`: ``TF_CONFIG`` naming every
replica (:mod:`.pods`), the Chief (or Worker 0) as master role, and TFJob's ``UpdateJobStatus``
(:mod:`.status`).
"""

from __future__ import annotations

from ...resources import ResourceType, lookup
from ..pytorchjob.controller import PyTorchJobController
from ..pytorchjob.sync import Flavor
from .admission import admit_tfjob
from .api import CONTROLLER_NAME, TENSORFLOW, is_master_role
from .pods import address_slots, tf_env
from .status import update_job_status


def _tfjobs() -> ResourceType:
    rt = lookup("kubeflow.org", "v1", "tfjobs")
    assert rt is not None
    return rt


TFJOBS = _tfjobs()

#: TFJob on the common job logic. A replica recreated after a failure gets a new IP; the others keep the
#: ``TF_CONFIG`` they started with (upstream's Service names would follow it), so none is marked stale.
TFJOB_FLAVOR = Flavor(
    fw=TENSORFLOW,
    address_slots=address_slots,
    pod_env=tf_env,
    is_master_role=is_master_role,
    update_job_status=update_job_status,
    env_container=TENSORFLOW.container,
)


class TFJobController(PyTorchJobController):
    name = CONTROLLER_NAME
    resource = TFJOBS
    flavor = TFJOB_FLAVOR
    admit = staticmethod(admit_tfjob)


__all__ = ["TFJOB_FLAVOR", "TFJobController"]
