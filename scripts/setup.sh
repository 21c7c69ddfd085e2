#!/usr/bin/env bash
# Create ./.venv with grprune, its dependencies and the test tools.
#
# torch is installed first and pinned: with no torch present, pip would resolve a
# bare "torch" to a multi-GB CUDA build. On this project's machines
# `pip install torch==2.13.0` takes the CPU build from the local wheel store.
# Elsewhere, choose the build with TORCH_INDEX_URL, e.g.
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu    bash scripts/setup.sh   # CPU only
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128  bash scripts/setup.sh   # NVIDIA GPU
# (PyPI's DGL 2.1.0 is a CPU build either way; grprune moves plain tensors to the GPU.)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
torch_spec=${GRPRUNE_TORCH:-torch==2.13.0}
say() { echo "setup: $*" >&2; }
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$python" --version 2>&1)"
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
if [ -n "${TORCH_INDEX_URL:-}" ]; then
  say "installing $torch_spec from $TORCH_INDEX_URL"
  "${pip[@]}" --index-url "$TORCH_INDEX_URL" "$torch_spec"
else
  say "installing $torch_spec"
  "${pip[@]}" "$torch_spec"
fi
say "installing grprune and its dependencies (DGL, RDKit, OGB, ...) with the test tools; about a minute"
"${pip[@]}" -e ".[test]"
.venv/bin/python -c "import grprune, torch; from grprune.compat import dgl; print(f'grprune {grprune.__version__} ready: torch {torch.__version__}, dgl {dgl.__version__}, CUDA available: {torch.cuda.is_available()}')"
