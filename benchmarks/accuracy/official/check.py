"""The official code's side of the data check: load the exported dataset the way its
``run.py`` does (OGB's ``PygGraphPropPredDataset``) and print the counts and hashes that
``export.py`` printed for grprune.

Run with the official code's venv::

    /work/official-venv/bin/python benchmarks/accuracy/official/check.py [ROOT]

Exit code 1 when a number differs from grprune's (``ROOT/ogbg_molbbbp/grprune.json``),
2 when the export is missing. It also prints the official code's own size split for
seeds 0-3 (``modelNew.utils.size_split_idx``) when ``OFFICIAL_SRC`` is set, to show how
it differs from grprune's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def official_side(root: Path, name: str = "ogbg-molbbbp", splits=("scaffold", "size")) -> dict:
    """Counts and hashes of the exported dataset as OGB's PyG loader reads it."""
    from ogb.graphproppred import PygGraphPropPredDataset
    ds = PygGraphPropPredDataset(name=name, root=str(root))
    graphs = [(d.x.numpy(), d.edge_index.numpy(), d.edge_attr.numpy(), int(d.y.view(-1)[0]))
              for d in ds]
    parts = {}
    for split in splits:
        idx = {p: v.numpy() for p, v in ds.get_idx_split(split).items()}
        parts[split] = {"sizes": {p: len(idx[p]) for p in common.PARTS},
                        "hash": common.split_hash(idx)}
    return {"dataset": name, "n_graphs": len(graphs), "graphs_hash": common.graphs_hash(graphs),
            "splits": parts}


def official_size_splits(root: Path, src: Path, seeds=range(4)) -> list[dict]:
    """The size split the official code draws itself, per training seed."""
    import random

    import numpy as np
    import torch
    from ogb.graphproppred import PygGraphPropPredDataset
    sys.path.insert(0, str(src))
    from modelNew.utils import size_split_idx
    ds = PygGraphPropPredDataset(name="ogbg-molbbbp", root=str(root))
    nodes = np.asarray([d.num_nodes for d in ds])
    out = []
    for seed in seeds:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        idx = size_split_idx(ds)
        out.append({"seed": seed, "sizes": {p: len(v) for p, v in idx.items()},
                    "hash": common.split_hash({p: v.numpy() for p, v in idx.items()}),
                    "train_atoms_min": int(nodes[idx["train"].numpy()].min()),
                    "valid_test_atoms_max": int(max(nodes[idx["valid"].numpy()].max(),
                                                    nodes[idx["test"].numpy()].max()))})
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else os.environ.get("OFFICIAL_DATA", "/work/official-data"))
    mine = root / "ogbg_molbbbp" / "grprune.json"
    if not mine.is_file():
        print(f"check.py: {mine} is missing; run export.py first", file=sys.stderr)
        return 2
    theirs = json.loads(mine.read_text())
    side = official_side(root)
    print(f"official  {side['dataset']}: {side['n_graphs']} graphs, graphs {side['graphs_hash']}")
    for split, s in side["splits"].items():
        print(f"official  {side['dataset']} {split}: {s['sizes']} split {s['hash']}")
    if os.environ.get("OFFICIAL_SRC"):
        for s in official_size_splits(root, Path(os.environ["OFFICIAL_SRC"])):
            print(f"official  own size split, seed {s['seed']}: {s['sizes']} split {s['hash']}, "
                  f"train >= {s['train_atoms_min']} atoms, valid/test <= "
                  f"{s['valid_test_atoms_max']}")
    same = side == theirs
    print("identical: graphs, counts and split indices" if same else
          "DIFFERENT from grprune's export: " + json.dumps(theirs))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
