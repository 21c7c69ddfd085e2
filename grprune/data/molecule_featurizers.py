"""The SMILES featurizers of molecule runs, by name (``data.featurizer``): ``ogb``
(:func:`grprune.data.molecules.smiles_to_graph`) and ``dgllife-canonical``
(:func:`dgllife_graph`, dgllife's canonical atom and bond features), and the one a
finished run was trained with (:func:`run_featurizer`), to featurize new SMILES.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from grprune.compat import dgl
from grprune.data.molecules import (MAX_ATOMS, check_smiles_text, lenient_mol, smiles_to_graph,
                                    unparsable_reason)
from grprune.errors import DataError
from grprune.messages import short_repr
from grprune.record.runconfig import FeatureSpec, RunConfig

#: width of dgllife's canonical atom and bond features
DGLLIFE_ATOM_DIM, DGLLIFE_BOND_DIM = 74, 12
_DGLLIFE: dict[str, Any] = {}


def dgllife_graph(smiles: str, lenient: bool = False, max_atoms: int = MAX_ATOMS
                  ) -> dgl.DGLGraph:
    """Featurize one SMILES with dgllife's canonical atom and bond featurizers.

    Atoms keep RDKit's order (dgllife's ``smiles_to_bigraph`` would renumber them
    canonically), and RDKit bond ``k`` is directed edges ``2k`` (begin -> end) and
    ``2k + 1``, as :func:`grprune.data.molecules.smiles_to_graph` orders them.

    Parameters
    ----------
    smiles : str
    lenient : bool
        If RDKit rejects the molecule, retry without the valence check.
    max_atoms : int
        Refuse a molecule over this many atoms before RDKit parses it (0: no limit).

    Returns
    -------
    dgl.DGLGraph
        int64 ids; ``ndata['feat']`` float32 (N, 74), ``edata['feat']`` float32 (E, 12).

    Raises
    ------
    DataError
        If the SMILES is empty, too large, or RDKit cannot parse it.
    """
    from rdkit import Chem, rdBase

    check_smiles_text(smiles, max_atoms)
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
        if mol is None and lenient:
            mol = lenient_mol(smiles)
    if mol is None or mol.GetNumAtoms() == 0:
        raise DataError(f"RDKit cannot parse SMILES {short_repr(smiles)}: "
                        f"{unparsable_reason(smiles)}")
    if not _DGLLIFE:
        from dgllife.utils import CanonicalAtomFeaturizer, CanonicalBondFeaturizer
        _DGLLIFE.update(atom=CanonicalAtomFeaturizer("feat"),
                        bond=CanonicalBondFeaturizer("feat", self_loop=False))
    try:
        node_feat = _DGLLIFE["atom"](mol)["feat"]
        if mol.GetNumBonds():
            edge_feat = _DGLLIFE["bond"](mol)["feat"]
        else:
            edge_feat = torch.zeros(0, DGLLIFE_BOND_DIM)
    except Exception:  # an element or property dgllife's one-hot lists cannot hold
        raise DataError(f"dgllife's canonical featurizer has no slot for an atom or bond of "
                        f"SMILES {short_repr(smiles)}") from None
    src, dst = [], []
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        src += [i, j]
        dst += [j, i]
    g = dgl.graph((torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)),
                  num_nodes=mol.GetNumAtoms())
    g.ndata["feat"] = node_feat.float()
    g.edata["feat"] = edge_feat.float()
    return g


#: featurizer name -> (feature kind of the model, ``to_graph(smiles, lenient=False)``)
FEATURIZERS: dict[str, tuple[str, Callable[..., dgl.DGLGraph]]] = {
    "ogb": ("ogb", smiles_to_graph),
    "dgllife-canonical": ("linear", dgllife_graph),
}


def run_featurizer(cfg: RunConfig, features: FeatureSpec) -> Callable[..., dgl.DGLGraph] | None:
    """The featurizer a molecule run was trained with, to featurize new SMILES.

    Parameters
    ----------
    cfg : RunConfig
        The run's resolved configuration (``data.featurizer`` where the dataset has that
        key).
    features : FeatureSpec
        The run's feature sizes (``kind``, ``node_dim``).

    Returns
    -------
    callable or None
        ``to_graph(smiles, lenient=False) -> DGLGraph``; None for a run on
        non-molecular data (its features come from no SMILES featurizer).
    """
    name = cfg.setting("data.featurizer")
    if name is None:
        name = "ogb" if features.kind == "ogb" else None
    if name is None or name not in FEATURIZERS:
        return None
    kind, to_graph = FEATURIZERS[name]
    if kind != features.kind:
        return None
    if kind == "linear" and features.node_dim != DGLLIFE_ATOM_DIM:
        return None
    return to_graph
