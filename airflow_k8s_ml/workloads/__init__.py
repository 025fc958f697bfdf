"""Reference container entrypoints: fine-tune, serve and batch-predict a small digits classifier.

Each module is a pod command (``python -m airflow_k8s_ml.workloads.<name>``) used by the demo DAG and by
tests of the operators. They need the ``workloads`` extra (torch); this ``__init__`` imports nothing heavy, so
the pure helpers (argument parsing, dataset splitting, URI I/O) stay importable without torch.

Entrypoints: :mod:`.finetune`, :mod:`.serve`, :mod:`.batch_predict`, :mod:`.seed`. Pure or stdlib/boto3:
:mod:`.cli`, :mod:`.dataset`, :mod:`.instances`, :mod:`.io`, :mod:`.distributed` (torch only inside its
functions). torch: :mod:`.model`, :mod:`.training`, :mod:`.checkpoint_io`.
"""

from __future__ import annotations

import warnings

# torch warns at import when numpy is absent; the workloads do not need numpy, and that line at the top of
# every pod log sends people debugging the wrong thing. Only this one message is silenced; importing torch
# is still left to the torch-based modules.
warnings.filterwarnings("ignore", message=r"Failed to initialize NumPy")
