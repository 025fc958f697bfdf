"""The ClusterTrainingRuntimes a Kubeflow Trainer install ships, installed when the cluster starts.

``torch-distributed`` is manifests/base/runtimes/torch_distributed.yaml as upstream ships it (the Kubeflow
SDK v2 finds it by the ``trainer.kubeflow.org/framework: torch`` label). Installing is idempotent: the store
is durable, so a runtime already there (perhaps edited by the user, as ``kubectl apply`` of the manifests
would allow) is left alone on every later start.
"""

from __future__ import annotations

from .api import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    API_VERSION,
    CLUSTER_TRAINING_RUNTIME,
    FRAMEWORK_LABEL,
    NODE,
    Obj,
)

TORCH_DISTRIBUTED = "torch-distributed"
TORCH_IMAGE = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"


def torch_distributed() -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": CLUSTER_TRAINING_RUNTIME,
        "metadata": {"name": TORCH_DISTRIBUTED, "labels": {FRAMEWORK_LABEL: "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": NODE,
                            "template": {
                                "metadata": {"labels": {ANCESTOR_LABEL: ANCESTOR_TRAINER}},
                                "spec": {
                                    "template": {
                                        "spec": {"containers": [{"name": NODE, "image": TORCH_IMAGE}]}
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def default_runtimes() -> list[Obj]:
    return [torch_distributed()]
