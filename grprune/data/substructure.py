"""``mol-substructure``: real molecules labelled by an RDKit substructure rule, with the
matched bonds as ground-truth explanation.

A ground-truth explanation benchmark on real molecules in the manner of GraphXAI's
molecule sets (Agarwal et al., "Evaluating explainability for graph neural networks",
Scientific Data 2023: ``Benzene`` and ``FluorideCarbonyl``, after McCloskey et al.,
PNAS 2019), built offline from the bundled MoleculeNet SMILES
(``grprune/data/files``; see its README for provenance) instead of GraphXAI's ZINC
subsets, which cannot be had here.

Rules (``-H data.rule=...``)
----------------------------
``benzene`` (default)
    label 1 iff the molecule matches the SMARTS ``c1ccccc1`` (a six-membered ring of
    aromatic carbons; fused rings match too); the ground-truth bonds are the ring bonds
    of every match.
``fluoride-carbonyl``
    label 1 iff the molecule matches both ``F~*`` (a fluorine and its bond) and
    ``[#6]=[#8]`` (a carbonyl C=O); the ground-truth bonds are the bonds of every match
    of both. A molecule with only one of the two is labelled 0.

A molecule labelled 0 has no ground-truth bond. The source labels (BBBP's ``p_np``, ...)
are not used. ``edata["edge_gt"]`` (int64, shape (E,)) is 1 on both directed edges of
each ground-truth bond (RDKit bond ``k`` is edges ``2k`` and ``2k + 1``,
:mod:`grprune.data.featurize`), as on the synthetic sets, so ``grprune explain``'s edge
ROC-AUC, Recall@K / Precision@K and top-K counts, and the trainer's motif diagnostics,
apply unchanged; there the bonds of label-0 molecules all count as not explanation.

Sources (``-H data.source=...``) and counts
-------------------------------------------
The molecules RDKit parses (as ``ogbg-mol*`` featurizes them: the same graphs and
cache), each split with the OGB scaffold rule (:func:`grprune.data.splits.scaffold_split`;
on BBBP it is OGB's official split): molecules (train / valid / test), and label-1
molecules (share of all; train / valid / test):

* ``bbbp`` (default): 2039 molecules, 1631 / 204 / 204. ``benzene``: 1412 label 1
  (69.2 %), 1137 / 122 / 153 per part; ``fluoride-carbonyl``: 212 (10.4 %), 185 / 14 / 13.
* ``bace``: 1513 molecules, 1210 / 151 / 152. ``benzene``: 1494 (98.7 %), 1204 / 151 /
  139; ``fluoride-carbonyl``: 604 (39.9 %), 516 / 58 / 30.
* ``hiv``: 41127 molecules, 32901 / 4113 / 4113. ``benzene``: 30402 (73.9 %), 24522 /
  3062 / 2818; ``fluoride-carbonyl``: 1383 (3.4 %), 1291 / 52 / 40.

(``tests/test_mol_groundtruth.py`` checks the ``bbbp`` rows.) ``bbbp`` with ``benzene``
is the default: small enough for the CPU, both classes well represented. ``bace`` with
``benzene`` is nearly all positive; use ``fluoride-carbonyl`` there.

>>> from grprune.data import load_dataset
>>> ds = load_dataset("mol-substructure", rule="benzene", source="bbbp")  # doctest: +SKIP
>>> ds.has_edge_gt                                                       # doctest: +SKIP
True
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from grprune.data.cache import CACHE_DIRNAME, cached_strings
from grprune.data.dataset import GraphDataset
from grprune.data.moleculenet_csv import cached_molecule_csv
from grprune.data.molecules import lenient_mol
from grprune.data.packed import PackedGraphs, graph_sizes
from grprune.data.registry import DATASETS, DatasetSource
from grprune.data.splits import murcko_scaffolds, scaffold_envs, scaffold_split
from grprune.errors import DataError
from grprune.hparams import Param
from grprune.record.files import file_sha256

#: rule name -> the SMARTS that must all match (label 1); their matched bonds are G_c
RULES: dict[str, tuple[str, ...]] = {
    "benzene": ("c1ccccc1",),
    "fluoride-carbonyl": ("F~*", "[#6]=[#8]"),
}
#: source name -> the ``ogbg-mol*`` dataset whose bundled CSV and featurization it uses
SOURCES = {"bbbp": "ogbg-molbbbp", "bace": "ogbg-molbace", "hiv": "ogbg-molhiv"}
#: bump when the matching changes: cached matches are then recomputed
MATCH_VERSION = 1
FOLDER = "mol_substructure"


def matched_bonds(mol, patterns: Sequence) -> list[int]:
    """RDKit bond ids of every match of every pattern, if all patterns match; else ``[]``.

    Parameters
    ----------
    mol : rdkit.Chem.Mol
    patterns : sequence of rdkit.Chem.Mol
        SMARTS query molecules, each with at least one bond.

    Returns
    -------
    list of int
        Sorted, distinct; empty when some pattern does not match (label 0).

    Examples
    --------
    >>> from rdkit import Chem
    >>> matched_bonds(Chem.MolFromSmiles("Cc1ccccc1"), [Chem.MolFromSmarts("c1ccccc1")])
    [1, 2, 3, 4, 5, 6]
    >>> matched_bonds(Chem.MolFromSmiles("CC(=O)C"), [Chem.MolFromSmarts("F~*"),
    ...                                                Chem.MolFromSmarts("[#6]=[#8]")])
    []
    """
    out: set[int] = set()
    for pattern in patterns:
        matches = mol.GetSubstructMatches(pattern, uniquify=True, maxMatches=100000)
        if not matches:
            return []
        for match in matches:
            for b in pattern.GetBonds():
                bond = mol.GetBondBetweenAtoms(match[b.GetBeginAtomIdx()],
                                               match[b.GetEndAtomIdx()])
                out.add(bond.GetIdx())
    return sorted(out)


def rule_matches(smiles: Sequence[str], rule: str) -> list[str]:
    """Each molecule's ground-truth bonds under ``rule``, as text: ``"1,2,3"``, ``""`` for
    label 0 (the format of the match cache).

    Molecules are parsed as the featurizer parses them (``Chem.MolFromSmiles``; one that
    only passes without the valence check, as HIV's 7 hypervalent complexes, with
    :func:`grprune.data.molecules.lenient_mol`), so atom and bond ids are the graph's.

    Raises
    ------
    DataError
        If a SMILES cannot be parsed at all.
    """
    from rdkit import Chem, rdBase

    patterns = [Chem.MolFromSmarts(s) for s in RULES[rule]]
    out = []
    with rdBase.BlockLogs():
        for i, s in enumerate(smiles):
            mol = Chem.MolFromSmiles(s) or lenient_mol(s)
            if mol is None:
                raise DataError(f"molecule {i} ({s!r}) cannot be parsed for rule {rule!r}")
            out.append(",".join(map(str, matched_bonds(mol, patterns))))
    return out


def edge_gt_array(matches: Sequence[str], num_edges: np.ndarray) -> torch.Tensor:
    """``edata["edge_gt"]`` of all graphs, one after the other.

    Parameters
    ----------
    matches : sequence of str, length G
        :func:`rule_matches`' text per graph.
    num_edges : np.ndarray of int64, shape (G,)
        Directed edges of each graph (2 per bond).

    Returns
    -------
    Tensor of int64, shape (sum(num_edges),)
        1 on edges ``2k`` and ``2k + 1`` of each matched bond ``k``.

    Raises
    ------
    DataError
        If a matched bond is not an edge of its graph (graph and molecule disagree).

    Examples
    --------
    >>> edge_gt_array(["", "1"], np.array([2, 4])).tolist()
    [0, 0, 0, 0, 1, 1]
    """
    ptr = np.concatenate([[0], np.cumsum(num_edges)]).astype(np.int64)
    gt = np.zeros(int(ptr[-1]), dtype=np.int64)
    for g, text in enumerate(matches):
        if not text:
            continue
        bonds = np.asarray([int(b) for b in text.split(",")], dtype=np.int64)
        if int(bonds.max()) * 2 + 1 >= int(num_edges[g]):
            raise DataError(f"graph {g}: matched bond {int(bonds.max())} is not one of its "
                            f"{int(num_edges[g]) // 2} bonds")
        gt[ptr[g] + 2 * bonds] = 1
        gt[ptr[g] + 2 * bonds + 1] = 1
    return torch.from_numpy(gt)


@DATASETS.register("mol-substructure", aliases=("substructure", "mol-gt"))
class MolSubstructure(DatasetSource):
    """MoleculeNet molecules labelled by a substructure rule; the matched bonds are the
    ground-truth explanation (see :mod:`grprune.data.substructure`)."""

    splits = ("scaffold",)
    params = {
        "split": Param("scaffold", "scaffold (OGB's scaffold rule)"),
        "rule": Param("benzene", "label 1 iff: benzene (SMARTS c1ccccc1) or "
                                 "fluoride-carbonyl (F~* and [#6]=[#8]); the matched bonds "
                                 "are the ground truth", choices=tuple(RULES)),
        "source": Param("bbbp", "bundled MoleculeNet SMILES: bbbp (2039), bace (1513) or "
                                "hiv (41127)", choices=tuple(SOURCES)),
    }
    metric = "rocauc"
    num_classes = 2
    # a run with a selector reports an epoch that uses it, so that explain always has an
    # explanation to score (the official preset selects among warm-up epochs too)
    selector_rules = {"train.select_warmup": False}
    recommended = {"encoder.layers": 4, "encoder.hidden": 64, "encoder.virtual_node": True,
                   "train.warmup_epochs": 0, "train.patience": 0}
    description = ("MoleculeNet SMILES labelled by an RDKit rule (benzene ring, or fluoride "
                   "and carbonyl); matched bonds are ground truth; scaffold split")

    def load(self, *, root: Path, download: bool = False, split: str = "scaffold",
             rule: str = "benzene", source: str = "bbbp") -> GraphDataset:
        """Featurize (cached with ``ogbg-mol*``), match the rule (cached) and split;
        ``download`` is ignored (the SMILES are bundled)."""
        import rdkit

        root = Path(root)
        src = DATASETS.get(SOURCES[source])()
        csv = src.bundled_csv()
        if not csv.is_file():
            raise DataError(f"bundled data file is missing: {csv} (reinstall grprune)")
        mg, status = cached_molecule_csv(csv, src.smiles_column, src.label_column,
                                         root / src.folder / CACHE_DIRNAME, lenient=src.lenient)
        sha = file_sha256(csv)
        cache = root / FOLDER / CACHE_DIRNAME
        key = {"source_sha256": sha, "rdkit_version": rdkit.__version__}
        matches, match_status = cached_strings(
            cache / f"{source}-{rule}.json",
            {**key, "rule": rule, "smarts": list(RULES[rule]), "match_version": MATCH_VERSION},
            lambda: rule_matches(mg.smiles, rule), len(mg.smiles), field="matches")
        scaffolds = cached_strings(cache / f"{source}-scaffolds.json",
                                   {**key, "scaffold_version": 2},
                                   lambda: murcko_scaffolds(mg.smiles, include_chirality=True),
                                   len(mg.smiles))[0]
        packed = PackedGraphs.from_graphs(mg.graphs).pack()
        graphs = PackedGraphs(packed.edge_index, packed.num_nodes, packed.num_edges,
                              packed.ndata, {**packed.edata, "edge_gt": edge_gt_array(
                                  matches, graph_sizes(packed)[1])})
        labels = np.asarray([1 if m else 0 for m in matches], dtype=np.int64)
        parts = scaffold_split(mg.smiles, scaffolds=scaffolds)
        info = {
            "dataset": self.registered_name, "split": split, "rule": rule,
            "smarts": list(RULES[rule]), "source": f"bundled {csv.name} ({SOURCES[source]})",
            "source_sha256": sha, "n_source_rows": int(mg.n_source_rows),
            "n_skipped": len(mg.skipped_rows), "skipped_rows": [int(r) for r in mg.skipped_rows],
            "n_graphs": len(labels), "n_label_1": int(labels.sum()),
            "label_1_by_part": {k: int(labels[v].sum()) for k, v in parts.items()},
            "split_sizes": {k: int(len(v)) for k, v in parts.items()},
            "split_source": "computed (OGB's scaffold rule)", "cache": status,
            "match_cache": match_status}
        return GraphDataset(self.registered_name, graphs, labels, parts, num_classes=2,
                            metric=self.metric, atom_encoder="ogb",
                            envs=scaffold_envs(scaffolds), smiles=mg.smiles,
                            source_rows=mg.source_rows, info=info)
