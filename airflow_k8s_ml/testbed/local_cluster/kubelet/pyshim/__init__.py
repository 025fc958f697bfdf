"""Directory put first on pod processes' PYTHONPATH; see :mod:`..network` and ``sitecustomize.py``."""
