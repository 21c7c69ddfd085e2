"""GOOD-HIV's scaffold domain: Bemis–Murcko scaffolds spelled as RDKit 2022.09 wrote them.

GOOD (:mod:`grprune.data.good_hiv`) takes each molecule's scaffold SMILES without
chirality as its domain. Scaffold strings depend on how RDKit writes SMILES, which
has changed since GOOD's time; :func:`murcko_scaffold` reproduces the 2022 spelling
(metal-bonded atoms unbracketed, :func:`_legacy_smiles`; 9 molecules from
:data:`GOOD_ERA_SCAFFOLDS`), and parses the 7 molecules current RDKit rejects for
their valence leniently. :func:`cached_scaffolds` keeps the scaffolds of a file in
a checksummed JSON cache. Everything here is importable from
:mod:`grprune.data.good_hiv` too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from rdkit import Chem, rdBase

from grprune.data.cache import cached_strings
from grprune.data.molecules import lenient_mol
from grprune.errors import DataError

#: atomic numbers of SMILES's organic subset (B, C, N, O, P, S, F, Cl, Br, I)
_ORGANIC = frozenset({5, 6, 7, 8, 9, 15, 16, 17, 35, 53})
#: one SMILES atom: a bracket atom or an organic-subset symbol
_ATOM_TOKEN = re.compile(r"\[[^\]]+\]|Br|Cl|[BCNOPSFIbcnops*]")

_PHENOXY_PC = (  # tetraphenoxy-phthalocyanine scaffold (rows 21127, 21129)
    "c1ccc(Oc2ccc3c(c2)C2=NC3=NC3=NC(=NC4=NC(=NC5=NC(=N2)c2ccc(Oc6ccccc6)cc25)c2ccc(Oc5ccccc5)"
    "cc24)c2cc(Oc4ccccc4)ccc23)cc1")
#: Scaffolds as RDKit 2022.09 writes them, for the 9 HIV molecules whose
#: scaffold SMILES current RDKit spells differently beyond the metal brackets
#: of :func:`_legacy_smiles` (fragment order, canonical order in symmetric
#: macrocycles, H count on Tl, dative bonds). Keyed by the source SMILES.
GOOD_ERA_SCAFFOLDS = {
    # row 16561
    "[O+]#C[Mo+2]12345(C#[O+])(C6=C1[C-]2C3=C64)[PH](c1ccccc1)(c1ccccc1)C=C[PH]5(c1ccccc1)"
    "c1ccccc1.[O+]#C[Mo]1234(C#[O+])(C#[O+])C5=C1[C-]2C3=C54":
    "C12=C3[C-]4C5=C1[Mo]2354.C1=C[PH](c2ccccc2)(c2ccccc2)[Mo+2]2345(C6=C2[C-]3C4=C65)"
    "[PH]1(c1ccccc1)c1ccccc1",
    # rows 20512-20514
    "[CH2-][Tl-]1([CH2-])[O+]=C2C=CC=CC=C2[OH+]1": "C1=CC=C2[OH+][TlH2-][O+]=C2C=C1",
    "C[CH-][Tl-]1([CH-]C)[O+]=C(c2ccccc2)[CH-]C(c2ccccc2)=[O+]1":
    "c1ccc(C2=[O+][TlH2-][O+]=C(c3ccccc3)[CH-]2)cc1",
    "C[CH-][Tl-]1([CH-]C)[O+]=C(C)[CH-]C(C)=[O+]1": "C1=[O+][TlH2-][O+]=C[CH-]1",
    # row 21124
    "CC(C)(c1ccccc1)c1ccc(Oc2ccc3c4nc5nc(nc6nc(nc7nc(nc(n4)c3c2)c2ccc(Oc3ccc(C(C)(C)c4ccccc4)"
    "cc3)cc72)c2ccc(Oc3ccc(C(C)(C)c4ccccc4)cc3)cc62)c2cc(Oc3ccc(C(C)(C)c4ccccc4)cc3)ccc52)cc1":
    "c1ccc(Cc2ccc(Oc3ccc4c(c3)C3=NC4=NC4=NC(=NC5=NC(=NC6=NC(=N3)c3ccc(Oc7ccc(Cc8ccccc8)cc7)"
    "cc36)c3ccc(Oc6ccc(Cc7ccccc7)cc6)cc35)c3cc(Oc5ccc(Cc6ccccc6)cc5)ccc34)cc2)cc1",
    # row 21127
    "CC(C)(C)c1ccc(Oc2ccc3c4nc5nc(nc6nc(nc7nc(nc(n4)c3c2)c2ccc(Oc3ccc(C(C)(C)C)cc3C(C)(C)C)"
    "cc72)c2ccc(Oc3ccc(C(C)(C)C)cc3C(C)(C)C)cc62)c2cc(Oc3ccc(C(C)(C)C)cc3C(C)(C)C)ccc52)"
    "c(C(C)(C)C)c1": _PHENOXY_PC,
    # row 21128
    "c1ccc(Oc2cccc(Oc3ccc4c5nc6nc(nc7nc(nc8nc(nc(n5)c4c3)c3ccc(Oc4cccc(Oc5ccccc5)c4)cc83)"
    "c3ccc(Oc4cccc(Oc5ccccc5)c4)cc73)c3cc(Oc4cccc(Oc5ccccc5)c4)ccc63)c2)cc1":
    "c1ccc(Oc2cccc(Oc3ccc4c(c3)C3=NC4=NC4=NC(=NC5=NC(=NC6=NC(=N3)c3ccc(Oc7cccc(Oc8ccccc8)c7)"
    "cc36)c3ccc(Oc6cccc(Oc7ccccc7)c6)cc35)c3cc(Oc5cccc(Oc6ccccc6)c5)ccc34)c2)cc1",
    # row 21129
    "CCCCCCCCCc1ccc(Oc2ccc3c4nc5nc(nc6nc(nc7nc(nc(n4)c3c2)c2ccc(Oc3ccc(CCCCCCCCC)cc3)cc72)"
    "c2ccc(Oc3ccc(CCCCCCCCC)cc3)cc62)c2cc(Oc3ccc(CCCCCCCCC)cc3)ccc52)cc1": _PHENOXY_PC,
    # row 35278
    "C1C[N+]23CCC[N+]4(C1)CC[S-]1[Fe+2]24([SH+]CC3)[S-]2CC[N+]34CCC[N+]5(CCC3)CC[SH+]"
    "[Fe+2]1254":
    "C1C[N+]23CCC[N+]4(C1)CC[S-]1[Fe+2]24([SH+]CC3)[S-]2CC[N+]34CCC[N+]5(CCC3)CC[SH+]"
    "[Fe+2]1254",
}


def _legacy_smiles(core: Chem.Mol) -> str:
    """Canonical SMILES (no stereo) with pre-2025 RDKit's atom brackets.

    RDKit 2025.03 (rdkit PR #8318) writes every organic-subset atom bonded to a
    metal in brackets with its H count (``[O]``, ``[NH]``); older releases,
    GOOD's among them, write it bare when its valence is a default one.
    Brackets do not change the canonical atom order, so each organic-subset
    atom token is rewritten as the writer spells that atom once the metals are
    replaced by dummy atoms; other atoms and all bonds, ring closures and
    branches stay as written. (For the 9 HIV molecules whose canonical order
    did change since 2022 see :data:`GOOD_ERA_SCAFFOLDS`.)
    """
    smiles = Chem.MolToSmiles(core, isomericSmiles=False)
    if not smiles or all(a.GetAtomicNum() in _ORGANIC for a in core.GetAtoms()):
        return smiles
    order = [int(x) for x in core.GetProp("_smilesAtomOutputOrder").strip("[]").split(",")
             if x.strip()]
    tokens = list(_ATOM_TOKEN.finditer(smiles))
    if len(tokens) != len(order) or len(order) != core.GetNumAtoms():
        return smiles  # unexpected SMILES shape: keep RDKit's own spelling
    plain = Chem.RWMol(core)
    for atom in plain.GetAtoms():
        if atom.GetAtomicNum() not in _ORGANIC:
            atom.SetAtomicNum(0)
    out, end = [], 0
    for token, idx in zip(tokens, order):
        out.append(smiles[end:token.start()])
        if core.GetAtomWithIdx(idx).GetAtomicNum() in _ORGANIC:
            out.append(plain.GetAtomWithIdx(idx).GetSmarts(False, False, False))
        else:
            out.append(token.group())
        end = token.end()
    out.append(smiles[end:])
    return "".join(out)


def _scaffold_of_mol(mol: Chem.Mol, strict: bool) -> str:
    """RDKit's ``MurckoScaffoldSmiles(mol=mol, includeChirality=False)`` in pre-2025
    spelling (:func:`_legacy_smiles`), optionally with a non-strict property
    update (for hypervalent atoms)."""
    core = Chem.MurckoDecompose(mol)
    core.ClearComputedProps()
    core.UpdatePropertyCache(strict=strict)
    Chem.GetSymmSSSR(core)
    return _legacy_smiles(core)


def murcko_scaffold(smiles: str) -> tuple[str, bool]:
    """The Bemis–Murcko scaffold SMILES of a molecule, without chirality, as GOOD computed it.

    GOOD's domain is ``MurckoScaffold.MurckoScaffoldSmiles(mol=MolFromSmiles(s),
    includeChirality=False)`` under the RDKit of 2022. This function runs the
    same steps (``MurckoDecompose``, property update, SSSR, canonical SMILES
    without stereo) and spells the result as that RDKit did: atoms bonded to
    metals are not bracketed (:func:`_legacy_smiles`), and the 9 HIV molecules
    whose scaffold current RDKit writes differently otherwise take their
    RDKit 2022.09 scaffold from :data:`GOOD_ERA_SCAFFOLDS`. A molecule RDKit
    rejects only for its valence (current RDKit rejects 7 HIV molecules that
    older releases accepted) is parsed without that check and its scaffold
    computed with a non-strict property update.

    Parameters
    ----------
    smiles : str

    Returns
    -------
    scaffold : str
        ``""`` for an acyclic molecule.
    lenient : bool
        Whether the lenient parse was needed.

    Raises
    ------
    DataError
        If RDKit cannot parse ``smiles`` even leniently.

    Examples
    --------
    >>> murcko_scaffold("Cc1ccccc1O")
    ('c1ccccc1', False)
    >>> murcko_scaffold("CCO")
    ('', False)
    >>> murcko_scaffold("OCC(O)C1O[Sb](O)(O)(O)OC1C(O)CO")  # no [O] around Sb
    ('C1CO[SbH]O1', False)
    """
    if not isinstance(smiles, str) or not smiles:
        raise DataError(f"empty or missing SMILES {smiles!r}")
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
        lenient = mol is None
        if lenient:
            relaxed = lenient_mol(smiles)
            if relaxed is None:
                raise DataError(f"RDKit cannot parse SMILES {smiles!r}, even without the "
                                "valence check")
            mol = relaxed
        if smiles in GOOD_ERA_SCAFFOLDS:
            return GOOD_ERA_SCAFFOLDS[smiles], lenient
        try:
            return _scaffold_of_mol(mol, strict=not lenient), lenient
        except Exception as exc:
            raise DataError(f"cannot compute the scaffold of SMILES {smiles!r} "
                            f"({type(exc).__name__}: {exc})") from None


def compute_scaffolds(smiles: Sequence[str], where: str = "SMILES",
                      rows: Sequence[int] | None = None) -> list[str]:
    """Scaffold of every molecule (:func:`murcko_scaffold`).

    Parameters
    ----------
    smiles : sequence of str, length G
    where : str
        Source named in errors (a file).
    rows : sequence of int, length G, optional
        Source row of each molecule, named in errors; positions by default.

    Returns
    -------
    list of str, length G

    Raises
    ------
    DataError
        Naming ``where`` and the row of a molecule RDKit cannot parse.
    """
    out = []
    for i, s in enumerate(smiles):
        try:
            out.append(murcko_scaffold(s)[0])
        except DataError as exc:
            row = i if rows is None else int(rows[i])
            raise DataError(f"{where}, row {row}: {exc}") from None
    return out


def cached_scaffolds(smiles: Sequence[str], key: dict[str, Any], path: Path,
                     where: str = "SMILES",
                     rows: Sequence[int] | None = None) -> tuple[list[str], str]:
    """Scaffolds of ``smiles`` from a JSON cache valid for ``key``, else computed and cached.

    See :func:`grprune.data.cache.cached_strings` (checksummed, written atomically).

    Parameters
    ----------
    smiles : sequence of str, length G
    key : dict
        JSON values the cache must hold unchanged (source sha256, RDKit
        version, recipe version).
    path : Path
        The cache file.
    where, rows
        See :func:`compute_scaffolds`.

    Returns
    -------
    scaffolds : list of str, length G
    status : str
        ``"hit"``, ``"built"``, ``"rebuilt (<reason>)"`` or ``"not written (<error>)"``.

    Raises
    ------
    DataError
        See :func:`compute_scaffolds`.
    """
    return cached_strings(path, key, lambda: compute_scaffolds(smiles, where, rows),
                          len(smiles))
