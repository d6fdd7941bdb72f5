#!/usr/bin/env bash
# Build the separate virtual environment that benchmarks/explain_sae_vs_saelens.py runs SAELens in.
#
# SAELens (sae-lens 6.x) pulls transformer-lens, transformers, datasets, wandb and others with
# their own pins, so it never goes into trustlab's environment: it lives in its own venv with the
# CPU build of torch 2.13.0 (the same torch as trustlab's pin; pip's find-links /opt/wheels holds
# torch-2.13.0+cpu, so no CUDA wheels are fetched).
#
#   bash tools/saelens_venv.sh [VENV_DIR]   # default /work/venvs/saelens
#
# The benchmark finds the venv through $SAELENS_PYTHON or at /work/venvs/saelens/bin/python.
set -euo pipefail
VENV="${1:-/work/venvs/saelens}"
PY="${PYTHON311:-python3.11}"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet torch==2.13.0 "sae-lens>=6.54,<7"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md

import torch

assert torch.version.cuda is None, f"expected the CPU build of torch, got CUDA {torch.version.cuda}"
cuda = [d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia")]
assert not cuda, f"CUDA wheels were installed: {cuda}"
from sae_lens import __version__

print(f"sae-lens {__version__}, torch {torch.__version__} (CPU build) in", __import__("sys").prefix)
PY
