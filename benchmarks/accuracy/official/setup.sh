#!/usr/bin/env bash
# The official PrunE code's own stack, in a venv of its own (never grprune's .venv):
#   bash benchmarks/accuracy/official/setup.sh            # -> /work/official-venv
#   OFFICIAL_VENV=/path/to/venv bash benchmarks/accuracy/official/setup.sh
# torch is pinned first (a bare "torch" resolves to a multi-GB CUDA build); set
# TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu for the CPU build elsewhere.
# torch_scatter / torch_sparse have no wheels for torch 2.13: patch.py ships shims that
# route the calls the code makes to torch_geometric.utils and torch.scatter_reduce.
set -euo pipefail
venv=${OFFICIAL_VENV:-/work/official-venv}
torch_spec=${OFFICIAL_TORCH:-torch==2.13.0}
python=${PYTHON:-python3.11}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
if [ -n "${TORCH_INDEX_URL:-}" ]; then
  "${pip[@]}" --index-url "$TORCH_INDEX_URL" "$torch_spec"
else
  "${pip[@]}" "$torch_spec"
fi
# what the official code imports and uses (README: torch-geometric, ogb, numpy) plus the
# helpers its modules import at the top (termcolor, torchmetrics, sklearn, pandas, ...)
"${pip[@]}" "$torch_spec" torch_geometric ogb rdkit termcolor torchmetrics scikit-learn \
  pandas matplotlib networkx scipy tqdm
"$venv/bin/python" -c "import torch, torch_geometric, ogb; print(f'official venv ready: torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, ogb {ogb.__version__}')"
