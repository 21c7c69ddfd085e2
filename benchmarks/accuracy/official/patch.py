"""The smallest text edits that let the official PrunE code run, applied to a checkout of it.

The official code (github.com/tianyao-aka/PrunE-GraphOOD at :data:`COMMIT`) does not run as
released: it imports a module that is not in the repository, packages it never uses, a
helper it never imports, and an attribute it never sets. Each entry of :data:`PATCHES`
replaces one exact text in one file; none touches the method (the model, the losses, the
schedule, the selection). ``README.md`` beside this file lists them with line and reason.

Usage::

    python -m benchmarks.accuracy.official.patch /work/official-src   # or $OFFICIAL_SRC

Idempotent: a patch whose replacement is already there is skipped; a file where neither
the original nor the replacement is found ends the script with exit code 2 (another
commit of the official code), naming the file and the patch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NamedTuple

#: the official code's commit this script patches
COMMIT = "7b41dae58f3943c4bfc04d68aa1a8db8bd2c068d"
#: marks every line this script writes
TAG = "# grprune-harness:"


class Patch(NamedTuple):
    """One exact text replacement in one file of the official code."""
    file: str
    name: str
    old: str
    new: str
    why: str


def _optional(line: str, fallback: str = "pass") -> str:
    """``line`` kept, but an ImportError of a package the code never calls is tolerated."""
    return (f"try:  {TAG} unused import made optional\n    {line.strip()}\n"
            f"except ImportError:\n    {fallback}\n")


_SPARSE = "from torch_sparse import coalesce, SparseTensor\n"
_SPARSE_SHIM = (f"try:  {TAG} torch_sparse has no wheel for torch 2.13\n"
                f"    from torch_sparse import coalesce, SparseTensor\n"
                f"except ImportError:\n"
                f"    from torch_geometric.utils import coalesce\n"
                f"    from torch_geometric.typing import SparseTensor\n")
_MAPS = "from GOOD.utils.data import x_map, e_map\n"
#: GOOD.utils.data's maps (divelab/GOOD): the vocabulary of the AtomEncoder/BondEncoder;
#: their lengths set the embedding tables' sizes and so the xavier init's scale, so they
#: are GOOD's, not torch_geometric.utils.smiles' (whose chirality and bond_type lists are
#: longer)
_MAPS_SHIM = (
    f"try:  {TAG} GOOD installed only for its feature maps otherwise\n"
    f"    from GOOD.utils.data import x_map, e_map\n"
    f"except ImportError:  {TAG} GOOD.utils.data's x_map/e_map, copied\n"
    "    x_map = {'atomic_num': list(range(0, 119)),\n"
    "             'chirality': ['CHI_UNSPECIFIED', 'CHI_TETRAHEDRAL_CW', 'CHI_TETRAHEDRAL_CCW',\n"
    "                           'CHI_OTHER'],\n"
    "             'degree': list(range(0, 11)), 'formal_charge': list(range(-5, 7)),\n"
    "             'num_hs': list(range(0, 9)), 'num_radical_electrons': list(range(0, 5)),\n"
    "             'hybridization': ['UNSPECIFIED', 'S', 'SP', 'SP2', 'SP3', 'SP3D', 'SP3D2',\n"
    "                               'OTHER'],\n"
    "             'is_aromatic': [False, True], 'is_in_ring': [False, True]}\n"
    "    e_map = {'bond_type': ['misc', 'SINGLE', 'DOUBLE', 'TRIPLE', 'AROMATIC'],\n"
    "             'stereo': ['STEREONONE', 'STEREOZ', 'STEREOE', 'STEREOCIS', 'STEREOTRANS',\n"
    "                        'STEREOANY'],\n"
    "             'is_conjugated': [False, True]}\n")

PATCHES: list[Patch] = [
    # run.py: packages imported at the top and never called on these datasets
    *[Patch("run.py", f"optional {mod}", f"{line}\n", _optional(line), f"{mod} is never called")
      for mod, line in [("higher", "import higher"), ("pymetis", "import pymetis"),
                        ("drugood", "from drugood.datasets import build_dataset"),
                        ("mmcv", "from mmcv import Config")]],
    *[Patch("run.py", f"optional GOOD {cls}",
            f"from GOOD.data.good_datasets.{mod} import {cls}\n",
            _optional(f"from GOOD.data.good_datasets.{mod} import {cls}"),
            "GOOD is needed for GOOD's datasets only, not for ogbg-molbbbp")
      for mod, cls in [("good_cmnist", "GOODCMNIST"), ("good_motif", "GOODMotif"),
                       ("good_hiv", "GOODHIV"), ("good_sst2", "GOODSST2")]],
    Patch("run.py", "import size_split_idx",
          "from modelNew.utils import save_numpy_array_to_file,RandomEdgeDrop\n",
          "from modelNew.utils import save_numpy_array_to_file,RandomEdgeDrop\n"
          f"from modelNew.utils import size_split_idx  {TAG} used below, never imported\n",
          "`size_split_idx` (modelNew/utils.py) is called for --domain size without an import"),
    Patch("run.py", "grprune split",
          "        split_idx = size_split_idx(dataset)\n",
          f"        if os.environ.get('OFFICIAL_SPLIT') == 'grprune':  {TAG} exported split\n"
          "            split_idx = dataset.get_idx_split('size')\n"
          "        else:\n"
          "            split_idx = size_split_idx(dataset)\n",
          "with OFFICIAL_SPLIT=grprune the size split is the one exported from grprune "
          "(split/size/ of the exported dataset) instead of the one size_split_idx redraws "
          "per seed; unset, the code is unchanged"),
    Patch("run.py", "grprune GOOD-Motif",
          "    dataset, meta_info = GOODMotif.load(args['root'], domain=args['domain'], "
          "shift=args['shift'], generate=False)\n",
          f"    if os.environ.get('OFFICIAL_EXPORT') == 'grprune':  {TAG} exported data\n"
          "        from good_export import load_good  # benchmarks/accuracy/official, on PYTHONPATH\n"
          "        dataset, meta_info = load_good(args['root'], 'good-motif', "
          "domain=args['domain'], shift=args['shift'])\n"
          "        split_idx = {'train': dataset['train'].indices(), "
          "'valid': dataset['val'].indices(), 'test': dataset['test'].indices()}\n"
          "    else:\n"
          "        dataset, meta_info = GOODMotif.load(args['root'], domain=args['domain'], "
          "shift=args['shift'], generate=False)\n",
          "with OFFICIAL_EXPORT=grprune, GOOD-Motif is grprune's export (good_export.load_good: "
          "the same train/val/test PyG datasets GOODMotif.load returns, from export.py's "
          "arrays), and split_idx names its parts for the result record; unset, unchanged"),
    Patch("run.py", "result record",
          "print (f'Best valid perf:{res[0]}, Test perf accordingly:{res[1]}')\n",
          "print (f'Best valid perf:{res[0]}, Test perf accordingly:{res[1]}')\n"
          f"if os.environ.get('OFFICIAL_RESULT_JSON'):  {TAG} the numbers above, as a file\n"
          "    with open(os.environ['OFFICIAL_RESULT_JSON'] + '.tmp', 'w') as _f:\n"
          "        json.dump({'valid': float(res[0]), 'test': float(res[1]),\n"
          "                   'curve': [[float(v), float(t)] for v, t in model.valid_metric_list],\n"
          "                   'split_sizes': {k: int(len(v)) for k, v in split_idx.items()}}, _f)\n"
          "    os.replace(os.environ['OFFICIAL_RESULT_JSON'] + '.tmp', "
          "os.environ['OFFICIAL_RESULT_JSON'])\n",
          "writes the selected (valid, test) and the per-epoch (valid, test) list the code "
          "selects from, atomically, when OFFICIAL_RESULT_JSON is set"),
    # modelNew/prune.py
    Patch("modelNew/prune.py", "missing ssl_module",
          "from modelNew.ssl_module import Encoder\n",
          _optional("from modelNew.ssl_module import Encoder"),
          "modelNew/ssl_module.py is not in the repository; Encoder is not used by prune.py"),
    Patch("modelNew/prune.py", "optional torchviz", "from torchviz import make_dot\n",
          _optional("from torchviz import make_dot"), "make_dot is never called"),
    Patch("modelNew/prune.py", "optional GCL",
          "import GCL.losses as L\nimport GCL.augmentors as A\n",
          _optional("import GCL.losses as L") + _optional("import GCL.augmentors as A"),
          "GCL (PyGCL) is never called"),
    Patch("modelNew/prune.py", "optional GCL eval",
          "from GCL.eval import get_split, SVMEvaluator\nfrom GCL.models import DualBranchContrast\n",
          _optional("from GCL.eval import get_split, SVMEvaluator")
          + _optional("from GCL.models import DualBranchContrast"),
          "GCL (PyGCL) is never called"),
    Patch("modelNew/prune.py", "calc_edge_stats",
          "        self.edge_prob_thres = edge_prob_thres\n",
          "        self.edge_prob_thres = edge_prob_thres\n"
          f"        self.calc_edge_stats = False  {TAG} read in learn_edge_weight, never set\n",
          "learn_edge_weight reads self.calc_edge_stats, which nothing sets: an "
          "AttributeError at the first epoch after pre-training; False skips the "
          "ground-truth-edge statistics (logging only, needs data.edge_gt)"),
    Patch("modelNew/prune.py", "checkpoint resume",
          "        for e in range(epochs):\n",
          f"        import os  {TAG} per-epoch checkpoint, checkpoint.py on PYTHONPATH\n"
          "        _ckpt = __import__('checkpoint') if os.environ.get('OFFICIAL_CHECKPOINT') "
          "else None\n"
          "        for e in range(_ckpt.resume(self) if _ckpt else 0, epochs):\n",
          "with OFFICIAL_CHECKPOINT set, a run restores the checkpoint file if there is one "
          "(after the pre-training set-up above, which it overwrites) and goes on at the "
          "next epoch; unset, the loop is unchanged"),
    Patch("modelNew/prune.py", "checkpoint save",
          "            self.valid_metric_list.append((val_metric_score,test_metric_score))\n"
          "            self.train()\n",
          "            self.valid_metric_list.append((val_metric_score,test_metric_score))\n"
          "            self.train()\n"
          f"            if _ckpt:  {TAG} everything the next epoch needs, atomically\n"
          "                _ckpt.save(self, e)\n",
          "with OFFICIAL_CHECKPOINT set, the end of every epoch saves what the next one "
          "depends on (checkpoint.py); unset, unchanged"),
    Patch("modelNew/prune.py", "torch_sparse", _SPARSE, _SPARSE_SHIM,
          "torch_sparse has no wheel for torch 2.13; coalesce/SparseTensor are not used "
          "on the GIN path (torch_geometric's placeholder raises if they were)"),
    # modelNew/utils.py
    Patch("modelNew/utils.py", "optional GCL",
          "import GCL.losses as L\nimport GCL.augmentors as A\n",
          _optional("import GCL.losses as L") + _optional("import GCL.augmentors as A"),
          "GCL (PyGCL) is never called"),
    Patch("modelNew/utils.py", "optional GCL eval",
          "from GCL.eval import get_split, SVMEvaluator\nfrom GCL.models import DualBranchContrast\n",
          _optional("from GCL.eval import get_split, SVMEvaluator")
          + _optional("from GCL.models import DualBranchContrast"),
          "GCL (PyGCL) is never called"),
    Patch("modelNew/utils.py", "optional seaborn", "import seaborn as sns\n",
          _optional("import seaborn as sns"), "seaborn is used by plotting helpers only"),
    Patch("modelNew/utils.py", "torch_sparse", _SPARSE, _SPARSE_SHIM, "as prune.py"),
    # the encoders: torch_sparse and GOOD's feature maps
    *[Patch(f"modelNew/{f}.py", "torch_sparse", _SPARSE, _SPARSE_SHIM, "as prune.py")
      for f in ("gin", "gcn", "vgin")],
    *[Patch(f"modelNew/{f}.py", "GOOD feature maps", _MAPS, _MAPS_SHIM,
            "GOOD is imported only for x_map/e_map, the AtomEncoder/BondEncoder vocabulary; "
            "without GOOD the same maps, copied from GOOD.utils.data (the sizes matter: "
            "they set the embedding tables and their xavier init)")
      for f in ("gin", "gcn", "vgin")],
]


def apply(src: Path, patches: list[Patch] = PATCHES) -> list[tuple[Patch, str]]:
    """Apply ``patches`` under ``src``; return ``(patch, "applied" | "already")`` per patch.

    Raises
    ------
    FileNotFoundError
        If a patched file is missing.
    ValueError
        If neither a patch's original text nor its replacement is in its file.
    """
    out = []
    texts: dict[str, str] = {}
    for p in patches:
        text = texts.get(p.file)
        if text is None:
            text = (src / p.file).read_text()
        if p.new in text:
            out.append((p, "already"))
        elif text.count(p.old) == 1:
            text = text.replace(p.old, p.new)
            out.append((p, "applied"))
        else:
            raise ValueError(f"{p.file}: patch {p.name!r}: the original text is found "
                             f"{text.count(p.old)} times (expected once); is this "
                             f"commit {COMMIT[:7]}?")
        texts[p.file] = text
    for name, text in texts.items():
        path = src / name
        if path.read_text() != text:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    src = Path(args[0] if args else os.environ.get("OFFICIAL_SRC", "/work/official-src"))
    if not (src / "run.py").is_file() or not (src / "modelNew").is_dir():
        print(f"patch.py: {src} is not a checkout of PrunE-GraphOOD (no run.py, modelNew/); "
              f"fetch it as README.md says", file=sys.stderr)
        return 2
    try:
        done = apply(src)
    except (ValueError, FileNotFoundError) as err:
        print(f"patch.py: {err}", file=sys.stderr)
        return 2
    for p, state in done:
        print(f"{state:8s} {p.file}: {p.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
