"""Pictures of a selector's choice: molecules with RDKit, synthetic graphs with networkx.

Both drawings show the graph's undirected bonds (one per pair of directed
edges) and mark a subset of them, chosen by :func:`grprune.explain_metrics.marked_bonds`:
either the bonds the evaluation mask keeps (``edge_weight > 0.5``) or the top-K bonds
by keep probability. Colours encode the keep probability
:math:`p = \\sigma(w)` (:func:`prob_color`).

Molecules are drawn with RDKit's ``rdMolDraw2D`` (Cairo for PNG, the SVG
drawer for SVG), kept bonds highlighted and atoms indexed. grprune's molecule
graphs come from :func:`grprune.data.molecules.smiles_to_graph`, which adds
RDKit bond ``k`` as directed edges ``2k`` (begin -> end) and ``2k+1``; the
drawing does not rely on that order: each graph bond is matched to the RDKit
bond between the same two atoms (:func:`rdkit_bond_ids`).

Synthetic graphs (no SMILES) are drawn with networkx and matplotlib (Agg, no
pyplot state): ground-truth motif edges in blue, other edges grey, marked
bonds solid and the rest dashed, line width growing with the keep probability.
"""

from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

#: colour ramp of the keep probability (light = low, dark = high)
CMAP = "YlGnBu"
MOTIF_COLOR = "#1f77b4"
OTHER_COLOR = "#9a9a9a"


def prob_color(p: float) -> tuple[float, float, float]:
    """RGB colour of a keep probability on the :data:`CMAP` ramp.

    Parameters
    ----------
    p : float in [0, 1]

    Returns
    -------
    (r, g, b) : floats in [0, 1]
        ``p = 0`` pale yellow, ``p = 1`` mid blue (light enough for the bond
        lines drawn on top).
    """
    from matplotlib import colormaps
    p = float(np.clip(p, 0.0, 1.0))
    r, g, b, _ = colormaps[CMAP](0.12 + 0.63 * p)
    return (float(r), float(g), float(b))


def highlight_caption(top_k: int | None, molecule: bool = True) -> str:
    """One line saying what the marked bonds are and how the probability is shown."""
    what = ("kept bonds (evaluation mask)" if top_k is None
            else f"top-{top_k} bonds by keep probability")
    if molecule:
        return f"highlighted: {what}; colour = keep probability p (pale yellow 0 -> blue 1)"
    return f"solid: {what}; line width = keep probability p"


# -- molecules --------------------------------------------------------------
def parse_molecule(smiles: str):
    """The RDKit molecule behind :func:`~grprune.data.molecules.smiles_to_graph`.

    ``Chem.MolFromSmiles`` (what :func:`ogb.utils.smiles2graph` uses), or the
    lenient parse without the valence check
    (:func:`~grprune.data.molecules.lenient_mol`) if that fails.

    Returns
    -------
    rdkit.Chem.Mol or None
        None if ``smiles`` is empty or cannot be parsed either way.
    """
    from rdkit import Chem, rdBase

    from grprune.data.molecules import lenient_mol
    if not isinstance(smiles, str) or not smiles.strip():
        return None
    with rdBase.BlockLogs():
        mol: Chem.Mol | None = Chem.MolFromSmiles(smiles)  # None if it cannot parse
        if mol is None or mol.GetNumAtoms() == 0:
            mol = lenient_mol(smiles)
    return mol


def rdkit_bond_ids(mol, bond_src: np.ndarray, bond_dst: np.ndarray,
                   num_nodes: int | None = None) -> np.ndarray:
    """RDKit bond index of each graph bond, matched by its two atoms.

    Parameters
    ----------
    mol : rdkit.Chem.Mol
    bond_src, bond_dst : np.ndarray of int, shape (U,)
        Atoms of each graph bond (graph node ``i`` is RDKit atom ``i``).
    num_nodes : int, optional
        The graph's node count; checked against the molecule's atom count.

    Returns
    -------
    np.ndarray of int64, shape (U,)
        For a graph from :func:`~grprune.data.molecules.smiles_to_graph` this is
        ``arange(U)`` (bond ``k`` is RDKit bond ``k``).

    Raises
    ------
    ValueError
        If the atom counts differ or a graph bond joins atoms RDKit does not bond.
    """
    if num_nodes is not None and mol.GetNumAtoms() != int(num_nodes):
        raise ValueError(f"molecule has {mol.GetNumAtoms()} atoms, graph {num_nodes} nodes")
    if len(bond_src) != mol.GetNumBonds():
        raise ValueError(f"molecule has {mol.GetNumBonds()} bonds, graph {len(bond_src)}")
    ids = np.empty(len(bond_src), dtype=np.int64)
    for k, (u, v) in enumerate(zip(bond_src, bond_dst)):
        bond = mol.GetBondBetweenAtoms(int(u), int(v))
        if bond is None:
            raise ValueError(f"graph bond {k} ({u}-{v}) is not a bond of the molecule")
        ids[k] = bond.GetIdx()
    return ids


def rdkit_drawing_error() -> str | None:
    """None if RDKit's 2D drawing code loads here, else the reason.

    ``rdkit.Chem.Draw.rdMolDraw2D`` links to system libraries (libXrender,
    Cairo) that minimal images may lack; callers then draw molecules as plain
    graphs (:func:`draw_graph`).
    """
    try:
        from rdkit.Chem.Draw import rdMolDraw2D  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _prepared(mol):
    from rdkit.Chem.Draw import rdMolDraw2D
    from rdkit import Chem
    try:
        return rdMolDraw2D.PrepareMolForDrawing(Chem.Mol(mol), addChiralHs=False)
    except Exception:  # unsanitized (lenient) molecules may not kekulize
        return rdMolDraw2D.PrepareMolForDrawing(Chem.Mol(mol), kekulize=False,
                                                addChiralHs=False)


def draw_molecule(mol, bond_ids: Sequence[int], bond_prob: np.ndarray, marked: np.ndarray,
                  legend: str = "", fmt: str = "png", size: tuple[int, int] = (640, 480)
                  ) -> bytes:
    """A molecule with its marked bonds highlighted in their probability colour.

    Parameters
    ----------
    mol : rdkit.Chem.Mol
    bond_ids : sequence of int, length U
        RDKit bond index of each graph bond (:func:`rdkit_bond_ids`).
    bond_prob : np.ndarray of float, shape (U,)
        Keep probability of each graph bond.
    marked : np.ndarray of bool, shape (U,)
        Bonds to highlight (:func:`grprune.explain_metrics.marked_bonds`).
    legend : str
        Text under the molecule (newlines allowed).
    fmt : {"png", "svg"}
    size : (width, height) in pixels

    Returns
    -------
    bytes
        The PNG or SVG file. Atoms carry their indices; in SVG, highlight
        shapes are ``<path class='bond-K ...'>`` filled with the colour, and
        the legend is also in a ``<desc>`` element.
    """
    from rdkit.Chem.Draw import rdMolDraw2D
    w, h = size
    drawer = (rdMolDraw2D.MolDraw2DCairo(w, h) if fmt == "png"
              else rdMolDraw2D.MolDraw2DSVG(w, h))
    opts: Any = drawer.drawOptions()  # rdkit-stubs type its option properties wrongly
    opts.addAtomIndices = True
    opts.legendFontSize = 15
    opts.clearBackground = True
    hb = [int(bond_ids[k]) for k in np.flatnonzero(marked).tolist()]
    colors = {int(bond_ids[k]): prob_color(bond_prob[k])
              for k in np.flatnonzero(marked).tolist()}
    drawer.DrawMolecule(_prepared(mol), legend=legend, highlightAtoms=[], highlightBonds=hb,
                        highlightBondColors=colors, highlightAtomColors={})
    drawer.FinishDrawing()
    text = drawer.GetDrawingText()
    if isinstance(text, bytes):
        return text
    if legend:  # RDKit draws text as paths: keep the legend readable for tools and readers
        from xml.sax.saxutils import escape
        text = text.replace("<!-- END OF HEADER -->",
                            f"<!-- END OF HEADER -->\n<desc>{escape(legend)}</desc>", 1)
    return text.encode("iso-8859-1", errors="xmlcharrefreplace")


def svg_highlighted_bonds(svg: bytes | str) -> set[int]:
    """RDKit bond ids drawn with a highlight in an SVG from :func:`draw_molecule`.

    Highlights are the filled ``<path class='bond-K ...'>`` shapes without an
    outline (``stroke-width:0.0px``); bond lines have ``fill:none`` and stereo
    wedges an outline.
    """
    import re
    text = svg.decode() if isinstance(svg, bytes) else svg
    out = set()
    for m in re.finditer(r"<path class='bond-(\d+)[^']*'[^>]*style='([^']*)'", text):
        style = m.group(2)
        if "fill:#" in style and "stroke-width:0.0px" in style:
            out.add(int(m.group(1)))
    return out


# -- synthetic graphs ---------------------------------------------------------
def _layout(num_nodes: int, src: np.ndarray, dst: np.ndarray, seed: int = 0) -> dict:
    import networkx as nx
    g = nx.Graph()
    g.add_nodes_from(range(num_nodes))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    if 0 < num_nodes <= 200:
        try:
            return nx.kamada_kawai_layout(g)
        except Exception:  # e.g. scipy missing
            pass
    return nx.spring_layout(g, seed=seed)


def draw_graph(num_nodes: int, bond_src: np.ndarray, bond_dst: np.ndarray,
               bond_prob: np.ndarray, marked: np.ndarray, bond_gt: np.ndarray | None = None,
               title: str = "", caption: str = "", top_k: int | None = None,
               fmt: str = "png", seed: int = 0) -> bytes:
    """A graph without chemistry, drawn with networkx and matplotlib (Agg).

    Parameters
    ----------
    num_nodes : int
    bond_src, bond_dst : np.ndarray of int, shape (U,)
        Undirected bonds (local node ids).
    bond_prob : np.ndarray of float, shape (U,)
        Keep probability; sets the line width (0.6 + 3.4 p points).
    marked : np.ndarray of bool, shape (U,)
        Bonds drawn solid (:func:`grprune.explain_metrics.marked_bonds`); the others dashed.
    bond_gt : np.ndarray of int, shape (U,), optional
        1 for ground-truth motif bonds (drawn blue, their nodes blue), 0 else.
    title : str
        Text above the picture.
    caption : str
        Title of the legend under the picture.
    top_k : int, optional
        Only changes the legend wording (what "marked" means).
    fmt : {"png", "svg"}
    seed : int
        Layout seed (used when the Kamada-Kawai layout is not).

    Returns
    -------
    bytes
        The PNG or SVG file.
    """
    import networkx as nx
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    bond_src = np.asarray(bond_src, dtype=np.int64)
    bond_dst = np.asarray(bond_dst, dtype=np.int64)
    gt = (np.zeros(len(bond_src), dtype=np.int64) if bond_gt is None
          else np.asarray(bond_gt, dtype=np.int64))
    pos = _layout(num_nodes, bond_src, bond_dst, seed)
    g = nx.Graph()
    g.add_nodes_from(range(num_nodes))
    fig = Figure(figsize=(7.0, 6.0), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_axis_off()
    motif_nodes = set(bond_src[gt == 1].tolist()) | set(bond_dst[gt == 1].tolist())
    node_color = ["#aec7e8" if v in motif_nodes else "#dddddd" for v in range(num_nodes)]
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=110 if num_nodes <= 60 else 40,
                           node_color=node_color, edgecolors="#555555", linewidths=0.5)
    if num_nodes <= 60:
        nx.draw_networkx_labels(g, pos, ax=ax, font_size=6)
    for is_marked in (False, True):
        for is_gt in (0, 1):
            sel = np.flatnonzero((marked == is_marked) & (gt == is_gt))
            if not len(sel):
                continue
            nx.draw_networkx_edges(
                g, pos, ax=ax, edgelist=list(zip(bond_src[sel].tolist(), bond_dst[sel].tolist())),
                width=(0.6 + 3.4 * np.clip(bond_prob[sel], 0, 1)).tolist(),
                edge_color=MOTIF_COLOR if is_gt else OTHER_COLOR,
                style="solid" if is_marked else (0, (3, 2)), alpha=0.95)
    on = "kept (evaluation mask)" if top_k is None else f"top-{top_k} by keep probability"
    off = "pruned" if top_k is None else f"not in top-{top_k}"
    handles = [Line2D([], [], color=OTHER_COLOR, lw=2.5, label="other edge")]
    if bond_gt is not None:
        handles.insert(0, Line2D([], [], color=MOTIF_COLOR, lw=2.5,
                                 label="ground-truth motif edge"))
    handles += [Line2D([], [], color="black", lw=2, label=f"solid: {on}"),
                Line2D([], [], color="black", lw=2, ls=(0, (3, 2)), label=f"dashed: {off}"),
                Line2D([], [], color="black", lw=0.6, label="width: keep probability p "
                                                             "(thin 0 -> thick 1)")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2,
              fontsize=7, frameon=False, title=caption or None, title_fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    buf = io.BytesIO()
    meta = {"Software": None} if fmt == "png" else {"Date": None}
    fig.savefig(buf, format=fmt, bbox_inches="tight", metadata=meta)
    return buf.getvalue()
