"""The dataset registry and the base class of dataset sources.

A dataset is added by subclassing :class:`DatasetSource` and registering it::

    @DATASETS.register("good-motif", aliases=("motif",))
    class GoodMotif(DatasetSource):
        splits = ("basis", "size")
        defaults = {"split": "basis", "split_seed": 0}
        metric = "accuracy"
        def load(self, *, split, root, download=False, split_seed=0): ...

Other packages register through the ``grprune.datasets`` entry-point group.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from grprune.errors import GrpruneError
from grprune.registry import Registry, normalize

if TYPE_CHECKING:
    from grprune.data.dataset import GraphDataset

DATASETS = Registry("dataset", entry_point_group="grprune.datasets")


def default_root() -> Path:
    """Data root: ``$GRPRUNE_DATA_ROOT`` if set and non-empty, else ``~/.cache/grprune/data``."""
    env = os.environ.get("GRPRUNE_DATA_ROOT", "").strip()
    return Path(env).expanduser() if env else Path("~/.cache/grprune/data").expanduser()


class DatasetSource:
    """Where a dataset comes from and how it is split.

    Attributes
    ----------
    splits : tuple of str
        Allowed split names; the first is the default.
    defaults : dict
        Dataset hyperparameters (``split``, ``split_seed``).
    recommended : dict
        Model/training overrides the paper uses for this dataset, as dotted
        config keys (``{"encoder.layers": 4}``).
    metric : str
        Evaluation metric of the returned dataset.
    num_classes : int
    description : str
        One line for listings.
    """

    splits: ClassVar[tuple[str, ...]] = ()
    defaults: ClassVar[dict[str, Any]] = {}
    recommended: ClassVar[dict[str, Any]] = {}
    metric: ClassVar[str] = "accuracy"
    num_classes: ClassVar[int] = 2
    description: ClassVar[str] = ""
    registered_name: ClassVar[str] = ""

    @classmethod
    def resolve_split(cls, split: str | None) -> str:
        """The canonical split name for ``split`` (``None``: the default).

        Raises
        ------
        GrpruneError
            If ``split`` is not one of :attr:`splits`; the message lists them.
        """
        if split is None:
            return cls.defaults.get("split", cls.splits[0])
        for name in cls.splits:
            if normalize(name) == normalize(split):
                return name
        close = difflib.get_close_matches(str(split), cls.splits, n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise GrpruneError(
            f"unknown split {split!r} for dataset {cls.registered_name or cls.__name__}.{hint} "
            f"Choices: {', '.join(cls.splits)}"
        )

    def load(
        self, *, split: str, root: Path, download: bool = False, split_seed: int = 0
    ) -> "GraphDataset":
        """Load the dataset with the given split.

        Parameters
        ----------
        split : str
            One of :attr:`splits` (already resolved by :meth:`resolve_split`).
        root : Path
            Data root: downloads and caches live under it.
        download : bool
            Fetch the original release instead of using bundled files.
        split_seed : int
            Seed for randomized splits.

        Returns
        -------
        GraphDataset

        Raises
        ------
        DataError
            On missing, corrupt or malformed data, or a failed download.
        """
        raise NotImplementedError


def load_dataset(
    name: str,
    *,
    split: str | None = None,
    root: str | os.PathLike | None = None,
    download: bool = False,
    split_seed: int = 0,
) -> "GraphDataset":
    """Load a registered dataset.

    Parameters
    ----------
    name : str
        Dataset name or alias (``"ogbg-molbbbp"``, ``"bbbp"``); see ``DATASETS.names()``.
    split : str, optional
        Split name; default: the dataset's default split.
    root : path, optional
        Data root; default :func:`default_root`.
    download : bool
        Fetch the original release (e.g. through OGB) instead of bundled files.
    split_seed : int
        Seed for randomized splits (e.g. ``size``).

    Returns
    -------
    GraphDataset
        ``info`` records the source, skipped rows, split and split sizes.

    Raises
    ------
    GrpruneError
        Unknown dataset or split name (the message lists the choices).
    DataError
        Missing, corrupt or malformed data, or a failed download.
    """
    cls = DATASETS.get(name)
    split = cls.resolve_split(split)
    root = Path(root).expanduser() if root is not None else default_root()
    return cls().load(split=split, root=root, download=download, split_seed=int(split_seed))
