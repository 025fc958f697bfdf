"""The workload kinds we create and watch, as one table of Kubernetes facts.

Why one table: a kind's REST resource, its name rule, the length of the names we generate for it and the
label that finds its pods used to be listed separately in ``kube/resources.py``, ``manifests/formats.py``,
``manifests/naming.py`` and the training sensor, so adding a kind meant editing each. They are now derived
from :data:`WORKLOAD_KINDS`; a new kind (the Trainer v2 ``TrainJob``) is one row here.

Pure, stdlib only (a module of the shared core): imported on every DAG parse through the name rules.
"""

from __future__ import annotations

from airflow_k8s_ml.k8s.record import Record

__all__ = ["WORKLOAD_KINDS", "KindFacts", "kind_facts"]


class KindFacts(Record):
    """What Kubernetes and we know about one workload kind.

    :param kind: / ``group`` / ``version`` / ``plural``: its REST resource.
    :param dns1035: its ``metadata.name`` must be a DNS-1035 label (else a DNS-1123 subdomain).
    :param name_max: the longest name the API server (or the kind's controller) accepts.
    :param generated_name_max: the longest name :func:`~airflow_k8s_ml.manifests.naming.workload_name`
        generates (shorter when the kind's pods or Services append a suffix); None: we generate none.
    :param pod_name_label: the label whose value is the workload's name on every pod it owns; None: none.
    :param training: a training workload (``TrainingJobSensor`` waits for it).
    """

    kind: str
    group: str
    version: str
    plural: str
    dns1035: bool
    name_max: int
    generated_name_max: int | None
    pod_name_label: str | None
    training: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


#: Job: subdomain, and the name becomes the ``job-name`` label value, hence 63; generated names 57 so the
#: pods' ``<job>-<5 random>`` names are never truncated. CronJob: 52 = 63 - 11, because its Jobs are named
#: ``<cronjob>-<minutes since epoch>``. PyTorchJob: DNS-1035 (training-operator validation); generated
#: names 48 leave room for the ``-worker-<i>`` Service/pod suffix up to 10^7 workers within 63. TrainJob:
#: DNS-1035, 63 (its CRD's CEL rules); its JobSet has the same name, and JobSet refuses a name whose pods
#: ``<name>-<replicated job>-<job index>-<pod index>-<5 random>`` exceed 63, so generated names are 33: room
#: for the longest replicated job upstream's runtimes have (``dataset-initializer``). Its pods are the
#: JobSet's, found by the JobSet name label.
WORKLOAD_KINDS: tuple[KindFacts, ...] = (
    KindFacts("Job", "batch", "v1", "jobs", False, 63, 57, "batch.kubernetes.io/job-name", training=True),
    KindFacts("CronJob", "batch", "v1", "cronjobs", False, 52, 52, None),
    KindFacts(
        "PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", True, 63, 48, "training.kubeflow.org/job-name",
        training=True,
    ),
    KindFacts("Deployment", "apps", "v1", "deployments", False, 253, None, None),
    KindFacts(
        "TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", True, 63, 33,
        "jobset.sigs.k8s.io/jobset-name", training=True,
    ),
)


def kind_facts(kind: str) -> KindFacts | None:
    """The facts of one workload kind, or None for a kind that is not a workload of ours."""
    for facts in WORKLOAD_KINDS:
        if facts.kind == kind:
            return facts
    return None
