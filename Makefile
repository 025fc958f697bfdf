# Two commands do all set-up on a fresh machine:
#   make demo   - the nightly DAG end to end on the embedded local cluster and embedded S3
#   make test   - the test suite (unit + integration against the local cluster, kubectl included)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: install demo demo-pytorchjob demo-trainjob demo-queue test lint typecheck bench clean local-up local-down

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, pinned: the CPU build is on disk; an unsatisfied range would download a multi-GB CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[local,dev,workloads,demo]'
	# PyTorchJob's published models for the schema check (tests/upstream_schemas.py); --no-deps: the SDK pins
	# kubernetes<36, which the cncf provider (>=36) excludes, and its models need nothing but that client.
	$(PIP) install -q --no-deps kubeflow-training==1.9.4
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/airflow-k8s-ml demo

# The same DAG as a distributed Kubeflow PyTorchJob (master + 2 workers, DDP over gloo).
demo-pytorchjob: $(STAMP)
	DEMO_CONF='{"mode": "pytorchjob", "workers": 2}' $(VENV)/bin/airflow-k8s-ml demo --output demo-output-pytorchjob

# The same DAG as a Kubeflow Trainer v2 TrainJob (2 nodes on the torch-distributed runtime, DDP over gloo).
demo-trainjob: $(STAMP)
	DEMO_CONF='{"mode": "trainjob", "workers": 2}' $(VENV)/bin/airflow-k8s-ml demo --output demo-output-trainjob

# Queued: the local cluster advertises 1 fake GPU and Kueue's user-queue 1 nvidia.com/gpu of quota; the
# training is submitted to user-queue and its task log shows the wait for admission (docs/nightly-dag.md).
# The nightly DAG queued on Kueue (1 fake GPU, a 1-GPU cluster-queue), then two runs of
# dags/queued_gpu_training.py competing for that GPU: the second waits (its log says why) until the first ends.
demo-queue: $(STAMP)
	DEMO_GPUS=1 DEMO_GPU_QUOTA=1 DEMO_CONF='{"queue": "user-queue"}' $(VENV)/bin/airflow-k8s-ml demo --output demo-output-queue

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider --durations=30 -m "not slow" tests; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

test-all: $(STAMP)
	$(PY) -m pytest -q tests

# ruff, and the import contracts of .importlinter: the provider's layers (sensors > operators|ui > triggers >
# kube|checkpoints > manifests|status > deadlines > k8s), no I/O in the pure layers, kube builds no objects,
# sensors use no private operator module, the provider never imports the test bed, the local cluster only the core
lint: $(STAMP)
	$(VENV)/bin/ruff check airflow_k8s_ml dags tests bench
	$(VENV)/bin/lint-imports --no-cache

# mypy on the package; --strict on the pure layers (the shared core, manifests, status, deadlines)
typecheck: $(STAMP)
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict airflow_k8s_ml/k8s airflow_k8s_ml/manifests airflow_k8s_ml/status airflow_k8s_ml/deadlines.py

# Every bench/ script, one after the other (about 30 minutes; they share no state).
bench: $(STAMP)
	$(PY) bench/local_cluster.py
	$(PY) bench/store_commit.py
	$(PY) bench/parse_cost.py
	$(PY) bench/checkpoint_verify.py
	$(PY) bench/wait_efficiency.py
	$(PY) bench/trigger_loop_lag.py
	$(PY) bench/relay_flood.py
	$(PY) bench/deploy_phases.py
	$(PY) bench/training_tab.py
	$(PY) bench/triggerer_load.py --n 100
	$(PY) bench/dag_overhead.py

local-up: $(STAMP)
	$(VENV)/bin/airflow-k8s-ml local up

local-down:
	$(VENV)/bin/airflow-k8s-ml local down

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info demo-output
