"""Make PyPI's DGL 2.1.0 importable on current PyTorch.

DGL 2.1.0 is the newest Linux wheel on PyPI. Its ``dgl.graphbolt`` sub-package
loads a C++ library that exists only for torch <= 2.2.1, and ``import dgl``
imports it eagerly, so on newer torch the import fails. grprune does not use
graphbolt (nor ``dgl.sparse``, which does not load either), so this module
registers an empty ``dgl.graphbolt`` module before DGL is imported. Graphs,
batching, ``dgl.function``, ``dgl.nn``, ``GraphDataLoader`` and
``save_graphs``/``load_graphs`` work.

This is the only place in grprune that touches the workaround; everything else
does ``from grprune.compat import dgl``.

Notes
-----
* ``DGLBACKEND`` defaults to ``pytorch`` so DGL does not print a backend notice.
* ``import dgl`` would import OGB and RDKit (for ``dgl.data``'s LRGB datasets, which
  grprune does not use); they are hidden from it, so that commands that do not read
  molecules (``grprune collect``) start without them. ``dgl.data`` skips those datasets
  when OGB is missing; grprune's molecule loaders import OGB and RDKit themselves.
* PyPI's DGL is a CPU build: a ``DGLGraph`` cannot be moved to CUDA. grprune
  keeps graphs on the CPU and moves plain tensors (see :mod:`grprune.batch`).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types

os.environ.setdefault("DGLBACKEND", "pytorch")


def _register_empty_graphbolt() -> None:
    if "dgl.graphbolt" in sys.modules:
        return
    module = types.ModuleType("dgl.graphbolt")
    module.__spec__ = importlib.machinery.ModuleSpec("dgl.graphbolt", None)
    module.__doc__ = "Empty stand-in registered by grprune.compat (graphbolt is unused)."
    sys.modules["dgl.graphbolt"] = module


class _HideOgb(importlib.abc.MetaPathFinder):
    """While DGL is imported: OGB is not found (``dgl.data`` then skips LRGB)."""

    def find_spec(self, name, path=None, target=None):
        if name == "ogb" or name.startswith("ogb."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


_register_empty_graphbolt()
_hide_ogb = _HideOgb()
sys.meta_path.insert(0, _hide_ogb)
try:
    import dgl  # noqa: E402  (must come after the stand-in)
finally:
    sys.meta_path.remove(_hide_ogb)

__all__ = ["dgl"]
