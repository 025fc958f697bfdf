"""The demo declares the images its DAGs use (``demo.IMAGES``), and its cluster has those only.

Why a test: the local cluster runs any image name with the local Python, so without an allow-list a typo'd
image in ``dags/`` would pass the demo and fail on a real cluster. The demo's cluster (and the production
tier's, which starts through ``demo.embedded_services``) allows :data:`demo.IMAGES` and answers any other
image as a registry answers a typo; this holds that list to exactly the images the DAGs' tasks name, so
a new image in a DAG, or a typo, fails here first.
"""

from __future__ import annotations

from pathlib import Path

from airflow_k8s_ml.testbed import demo
from airflow_k8s_ml.testbed.local_cluster.kubelet.images import rule_for
from airflow_k8s_ml.testbed.local_cluster.settings import allow_list

DAGS = Path(__file__).resolve().parents[2] / "dags"


def dag_images() -> dict[str, set[str]]:
    """image -> the tasks naming it, over every DAG of the demo's folder (as the dag-processor reads it:
    ``.airflowignore`` keeps ``dags/examples/`` out)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS), safe_mode=False)
    assert bag.import_errors == {}, bag.import_errors
    assert {"nightly_finetune", "queued_gpu_training"} <= set(bag.dags), sorted(bag.dags)
    images: dict[str, set[str]] = {}
    for dag in bag.dags.values():
        for task in dag.tasks:
            image = getattr(task, "image", None)
            if image:
                images.setdefault(str(image), set()).add(f"{dag.dag_id}.{task.task_id}")
    return images


def test_the_demo_declares_exactly_the_images_its_dags_use() -> None:
    images = dag_images()
    assert sorted(images) == sorted(demo.IMAGES), images


def test_the_demo_cluster_has_those_images_and_no_other() -> None:
    rules = allow_list(demo.IMAGES)
    for image in demo.IMAGES:
        rule = rule_for(rules, image)
        assert rule is not None and rule.allow, (image, rule)
    for typo in ("ghcr.io/airflow-k8s-ml/workload:0.1.0", "ghcr.io/airflow-k8s-ml/workloads:0.1"):
        rule = rule_for(rules, typo)
        assert rule is not None and not rule.allow and rule.missing, (typo, rule)
