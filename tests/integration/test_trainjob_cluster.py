"""Kubeflow Trainer v2 on the local cluster: a TrainJob rendered into a JobSet of Indexed Jobs whose pods
really train together (gloo all-reduce across two nodes), and its failure paths."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ..cluster_fixtures import wait_for
from .pod_helpers import read_log
from .trainjob_helpers import (
    ALL_REDUCE,
    condition,
    condition_history,
    create_trainjob,
    get_jobset,
    get_trainjob,
    is_true,
    trainjob,
    watch_trainjob,
)

pytest.importorskip("torch")


def test_two_node_trainjob_all_reduces_over_gloo(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    created = create_trainjob(custom, namespace, trainjob("allreduce", ALL_REDUCE, trainer={"numNodes": 2}))
    versions = watch_trainjob(
        custom, namespace, "allreduce", is_true("Complete"), since=created["metadata"]["resourceVersion"]
    )

    # Upstream v1alpha1 has no Created/Running conditions: nothing until the JobSet's Completed is copied.
    assert condition_history(versions) == ["", "Complete=True"]
    done = versions[-1]
    complete = condition(done, "Complete")
    assert complete is not None
    assert (complete["reason"], complete["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    assert done["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]

    jobset = get_jobset(custom, namespace, "allreduce")
    owner = jobset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "allreduce", True)
    assert jobset["status"]["terminalState"] == "Completed"
    node = jobset["spec"]["replicatedJobs"][0]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["PET_NNODES"] == "2"
    assert env["PET_NPROC_PER_NODE"] == "1"
    assert env["PET_MASTER_ADDR"] == "allreduce-node-0-0.allreduce"
    assert env["PET_MASTER_PORT"] == "29500"
    assert env["PET_NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }

    job = batch.read_namespaced_job("allreduce-node-0", namespace)
    assert (job.spec.parallelism, job.spec.completions, job.spec.completion_mode) == (2, 2, "Indexed")
    assert job.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == "allreduce"
    assert job.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert job.metadata.labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert job.metadata.owner_references[0].kind == "JobSet"

    service = core.read_namespaced_service("allreduce", namespace)
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector == {"jobset.sigs.k8s.io/jobset-name": "allreduce"}

    pods = core.list_namespaced_pod(
        namespace, label_selector="jobset.sigs.k8s.io/jobset-name=allreduce"
    ).items
    by_index = {p.metadata.annotations["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert sorted(by_index) == ["0", "1"]
    for index, pod in by_index.items():
        assert pod.metadata.name.startswith(f"allreduce-node-0-{index}-")
        assert pod.metadata.labels["jobset.sigs.k8s.io/job-index"] == "0"
        assert pod.spec.hostname == f"allreduce-node-0-{index}"
        assert pod.spec.subdomain == "allreduce"
        log = read_log(core, namespace, pod.metadata.name)
        assert f"rank={index} world=2 nproc=1" in log
        assert "all_reduce=3 world_size=2" in log


FAIL_ON_RANK_1 = """
import os, sys
rank = int(os.environ["PET_NODE_RANK"])
print(f"node {rank} starting", flush=True)
sys.exit(3 if rank == 1 else 0)
"""


def fail_fast_runtime(name: str) -> dict[str, object]:
    """A namespaced TrainingRuntime like torch-distributed whose node Job gives up at the first failure."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "containers": [{"name": "node", "image": "python:3.11"}],
                                        }
                                    },
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def test_failing_node_fails_the_trainjob_with_the_jobset_reason(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    custom.create_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainingruntimes", fail_fast_runtime("fail-fast")
    )
    body = trainjob(
        "broken",
        FAIL_ON_RANK_1,
        runtime={"name": "fail-fast", "kind": "TrainingRuntime"},
        trainer={"numNodes": 2},
    )
    created = create_trainjob(custom, namespace, body)
    versions = watch_trainjob(
        custom, namespace, "broken", is_true("Failed"), since=created["metadata"]["resourceVersion"]
    )

    failed = condition(versions[-1], "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: broken-node-0)",
    )
    assert condition(versions[-1], "Complete") is None
    jobset = get_jobset(custom, namespace, "broken")
    assert jobset["status"]["terminalState"] == "Failed"
    js_failed = condition(jobset, "Failed")
    assert js_failed is not None and js_failed["reason"] == "FailedJobs"
    job = batch.read_namespaced_job("broken-node-0", namespace)
    job_failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert job_failed.reason == "BackoffLimitExceeded"
    pods = core.list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=broken").items
    failed_pod = next(p for p in pods if p.status.phase == "Failed")
    assert failed_pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == "1"
    assert "node 1 starting" in read_log(core, namespace, failed_pod.metadata.name)


def test_active_deadline_fails_the_trainjob_and_leaves_no_pods(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    body = trainjob(
        "slow",
        "import time; print('training', flush=True); time.sleep(120)",
        trainer={"numNodes": 2},
        activeDeadlineSeconds=2,
    )
    created = create_trainjob(custom, namespace, body)
    versions = watch_trainjob(
        custom, namespace, "slow", is_true("Failed"), since=created["metadata"]["resourceVersion"]
    )

    failed = condition(versions[-1], "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    wait_for(
        lambda: (
            core.list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=slow").items
        ),
        lambda pods: not pods,
        timeout=60,
        what="pods of the TrainJob gone",
    )
    with pytest.raises(client.ApiException) as gone:
        get_jobset(custom, namespace, "slow")
    assert gone.value.status == 404
    assert condition(get_trainjob(custom, namespace, "slow"), "Failed") == failed


def test_suspended_trainjob_runs_nothing_until_resumed(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    created = create_trainjob(custom, namespace, trainjob("later", "print('ran', flush=True)", suspend=True))
    versions = watch_trainjob(
        custom, namespace, "later", is_true("Suspended"), since=created["metadata"]["resourceVersion"]
    )
    suspended = condition(versions[-1], "Suspended")
    assert suspended is not None
    assert (suspended["reason"], suspended["message"]) == ("Suspended", "TrainJob is suspended")
    wait_for(lambda: get_jobset(custom, namespace, "later"), is_true("Suspended"), what="JobSet suspended")
    job = wait_for(lambda: batch.read_namespaced_job("later-node-0", namespace), what="child Job")
    assert job.spec.suspend is True
    assert core.list_namespaced_pod(namespace).items == []

    # Resumed as Kueue does it: suspend lifted and a runtime patch added in one request.
    pod = {
        "metadata": {"labels": {"admitted-by": "queue"}},
        "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}},
    }
    patch = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod}}}]}
            }
        },
    }
    resumed = custom.patch_namespaced_custom_object(
        "trainer.kubeflow.org",
        "v1alpha1",
        namespace,
        "trainjobs",
        "later",
        {"spec": {"suspend": False, "runtimePatches": [patch]}},
    )
    versions = watch_trainjob(
        custom, namespace, "later", is_true("Complete"), since=resumed["metadata"]["resourceVersion"]
    )
    suspended = condition(versions[-1], "Suspended")
    assert suspended is not None
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "False",
        "Resumed",
        "TrainJob is resumed",
    )
    assert condition(get_jobset(custom, namespace, "later"), "Suspended")["reason"] == "ResumeJobs"  # type: ignore[index]
    ran = core.list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=later").items
    assert [p.metadata.labels["admitted-by"] for p in ran] == ["queue"]
    assert ran[0].spec.node_selector == {"kubernetes.io/os": "linux"}


def test_default_runtime_is_installed_once_and_kept_across_restarts(tmp_path: Path) -> None:
    """The store is durable: a restart neither duplicates nor resets a runtime the user changed."""
    from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
    from airflow_k8s_ml.testbed.local_cluster.resources import lookup

    from ..cluster_fixtures import fast_settings

    runtimes = lookup("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")
    assert runtimes is not None
    state = tmp_path / "state"
    with ClusterThread(fast_settings(state)) as first:
        installed = first.call(lambda: first.cluster.store.get(runtimes, "", "torch-distributed"))
        assert installed["metadata"]["labels"] == {"trainer.kubeflow.org/framework": "torch"}
        assert installed["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}

        def relabel(obj: dict[str, Any]) -> None:
            obj["metadata"]["labels"]["edited"] = "yes"

        first.call(lambda: first.cluster.store.mutate(runtimes, "", "torch-distributed", relabel))
    with ClusterThread(fast_settings(state)) as second:
        kept = second.call(lambda: second.cluster.store.get(runtimes, "", "torch-distributed"))
        listed, _ = second.call(lambda: second.cluster.store.list(runtimes))
    assert kept["metadata"]["uid"] == installed["metadata"]["uid"]
    assert kept["metadata"]["labels"]["edited"] == "yes"
    assert [r["metadata"]["name"] for r in listed] == ["torch-distributed"]


def test_webhook_denials_come_back_as_upstream_words_them(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    with pytest.raises(client.ApiException) as missing:
        create_trainjob(
            custom, namespace, trainjob("orphan", "print(1)", runtime={"name": "no-such-runtime"})
        )
    assert missing.value.status == 403
    message = json.loads(missing.value.body)["message"]
    assert message.startswith(
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
    )
    assert message.endswith(
        'clustertrainingruntimes.trainer.kubeflow.org "no-such-runtime" not found: specified '
        "clusterTrainingRuntime must be created before the TrainJob is created"
    )
    with pytest.raises(client.ApiException) as reserved:
        env = [{"name": "PET_NODE_RANK", "value": "7"}]
        create_trainjob(custom, namespace, trainjob("reserved", "print(1)", trainer={"env": env}))
    assert reserved.value.status == 403
    assert "must not have reserved envs, invalid envs configured: [PET_NODE_RANK]" in reserved.value.body
    with pytest.raises(client.ApiException) as bad_name:
        create_trainjob(custom, namespace, trainjob("9lives", "print(1)"))
    assert bad_name.value.status == 422
    assert "metadata.name must match RFC 1035 DNS label format" in bad_name.value.body


TORCHRUN_ALL_REDUCE = """
import os
import torch, torch.distributed as dist
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"torchrun rank={dist.get_rank()} world={dist.get_world_size()} sum={value.item():g}", flush=True)
dist.destroy_process_group()
"""


def test_torchrun_reads_the_pet_environment(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    """Upstream's way: ``torchrun`` with no arguments but the script takes nnodes, node rank and the
    rendezvous endpoint from PET_*; two nodes of two processes each all-reduce over gloo."""
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_ALL_REDUCE)
    trainer = {
        "image": "python:3.11",
        "command": ["python", "-m", "torch.distributed.run", str(script)],
        "numNodes": 2,
        "numProcPerNode": 2,
    }
    created = create_trainjob(custom, namespace, trainjob("torchrun", trainer=trainer))
    watch_trainjob(
        custom,
        namespace,
        "torchrun",
        is_true("Complete"),
        since=created["metadata"]["resourceVersion"],
        timeout=120,
    )
    pods = core.list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=torchrun").items
    logs = "".join(read_log(core, namespace, p.metadata.name) for p in pods)
    # Two processes share a node's stdout, so their lines may interleave: match anywhere, not per line.
    ranks = sorted(int(rank) for rank in re.findall(r"torchrun rank=(\d+) world=4 sum=10", logs))
    assert ranks == [0, 1, 2, 3], logs


@pytest.mark.parametrize("propagation", [None, "Foreground"])
def test_deleting_a_trainjob_removes_its_jobset_jobs_service_and_pods(
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    batch: client.BatchV1Api,
    namespace: str,
    propagation: str | None,
) -> None:
    selector = "jobset.sigs.k8s.io/jobset-name=doomed"
    body = trainjob(
        "doomed", "import time; print('up', flush=True); time.sleep(120)", trainer={"numNodes": 2}
    )
    create_trainjob(custom, namespace, body)
    wait_for(
        lambda: core.list_namespaced_pod(namespace, label_selector=selector).items,
        lambda pods: len(pods) == 2 and all(p.status.phase == "Running" for p in pods),
        timeout=60,
        what="both nodes running",
    )

    options = {"propagation_policy": propagation} if propagation else {}
    custom.delete_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", "doomed", **options
    )

    wait_for(
        lambda: (
            core.list_namespaced_pod(namespace, label_selector=selector).items
            + batch.list_namespaced_job(namespace, label_selector=selector).items
            + core.list_namespaced_service(namespace).items
            + custom.list_namespaced_custom_object(
                "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs"
            )["items"]
            + core.list_namespaced_config_map(
                namespace, field_selector="metadata.name=doomed-runtime-snapshot"
            ).items
            + custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets")[
                "items"
            ]
        ),
        lambda left: not left,
        timeout=60,
        what="everything of the TrainJob collected",
    )


def test_runtime_patch_mounts_a_volume_on_every_node(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    pod = {
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "containers": [{"name": "node", "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
    }
    patch = {
        "manager": "airflow.apache.org/airflow-k8s-ml",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]
                }
            }
        },
    }
    code = "open('/scratch/ok', 'w').write('1'); print('wrote', open('/scratch/ok').read(), flush=True)"
    created = create_trainjob(
        custom, namespace, trainjob("patched", code, trainer={"numNodes": 2}, runtimePatches=[patch])
    )
    assert created["spec"]["runtimePatches"][0]["time"]
    watch_trainjob(
        custom, namespace, "patched", is_true("Complete"), since=created["metadata"]["resourceVersion"]
    )
    pods = core.list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=patched").items
    assert len(pods) == 2
    for p in pods:
        assert [v.name for v in p.spec.volumes] == ["scratch"]
        assert "wrote 1" in read_log(core, namespace, p.metadata.name)


def test_the_runtime_snapshot_keeps_a_started_trainjob_independent_of_its_runtime(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    custom.create_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainingruntimes", fail_fast_runtime("short-lived")
    )
    body = trainjob(
        "kept",
        "print('from the snapshot', flush=True)",
        runtime={"name": "short-lived", "kind": "TrainingRuntime"},
    )
    body["spec"]["suspend"] = True
    create_trainjob(custom, namespace, body)
    snapshot = wait_for(
        lambda: (
            core.list_namespaced_config_map(
                namespace, field_selector="metadata.name=kept-runtime-snapshot"
            ).items
        ),
        what="runtime snapshot ConfigMap",
    )[0]
    assert snapshot.metadata.owner_references[0].kind == "TrainJob"
    assert "name: short-lived" in snapshot.data["runtime"]

    edited = fail_fast_runtime("short-lived")["spec"]
    edited["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 5
    custom.patch_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainingruntimes", "short-lived", {"spec": edited}
    )
    custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", "kept")
    resumed = custom.patch_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", "kept", {"spec": {"suspend": False}}
    )
    watch_trainjob(
        custom, namespace, "kept", is_true("Complete"), since=resumed["metadata"]["resourceVersion"]
    )
    jobset = get_jobset(custom, namespace, "kept")
    assert (
        jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] == 0
    )  # the deleted runtime's


def test_failing_node_on_the_default_runtime_retries_in_place_then_fails(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    """torch-distributed leaves restartPolicy OnFailure and backoffLimit 6 to the defaults: the node's
    container restarts in place until the Job's back-off limit, then the TrainJob fails as upstream."""
    created = create_trainjob(custom, namespace, trainjob("retries", FAIL_ON_RANK_1, trainer={"numNodes": 2}))
    versions = watch_trainjob(
        custom,
        namespace,
        "retries",
        is_true("Failed"),
        since=created["metadata"]["resourceVersion"],
        timeout=120,
    )
    failed = condition(versions[-1], "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: retries-node-0)",
    )
    jobset = get_jobset(custom, namespace, "retries")
    pod_spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "OnFailure"
