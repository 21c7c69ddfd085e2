"""The dataset registry and the base class of dataset sources.

A dataset is added by subclassing :class:`DatasetSource` and registering it::

    @DATASETS.register("good-motif", aliases=("motif",))
    class GoodMotif(DatasetSource):
        splits = ("basis", "size")
        params = {"split": Param("basis", "the shift's domain"),
                  "shift": Param("covariate", "kind of shift", choices=("covariate", "concept")),
                  "seed": Param(0, "generator seed")}
        metric = "accuracy"
        def load(self, *, root, download=False, split, shift, seed): ...

Every key of ``params`` (:class:`grprune.hparams.Param`) is a dataset hyperparameter:
``data.KEY`` in a config, ``-H data.KEY=VALUE`` on the command line (``--split`` and
``--shift`` are flags), passed to :meth:`DatasetSource.load` as a keyword argument after
:meth:`DatasetSource.resolve_params` has coerced and checked it.

Other packages register through the ``grprune.datasets`` entry-point group. Whatever
registers must subclass :class:`DatasetSource` (a GrpruneError at registration otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from grprune.errors import GrpruneError, did_you_mean
from grprune.hparams import Configurable
from grprune.registry import Registry, normalize

if TYPE_CHECKING:
    from grprune.data.dataset import GraphDataset

DATASETS = Registry("dataset", entry_point_group="grprune.datasets")


def default_root() -> Path:
    """Data root: ``$GRPRUNE_DATA_ROOT`` if set and non-empty, else ``~/.cache/grprune/data``."""
    from grprune.record.userfiles import expand_user
    env = os.environ.get("GRPRUNE_DATA_ROOT", "").strip()
    return expand_user(env or "~/.cache/grprune/data",
                       "GRPRUNE_DATA_ROOT" if env else "the default data root")


def resolve_root(root: str | os.PathLike | None = None) -> Path:
    """``root`` with ``~`` expanded, or :func:`default_root` when it is None.

    Raises
    ------
    GrpruneError
        A ``~user`` that names no user, or ``~`` without a home directory.
    """
    from grprune.record.userfiles import expand_user
    return expand_user(root, "--root") if root is not None else default_root()


class DatasetSource(Configurable):
    """Where a dataset comes from and how it is split.

    Attributes
    ----------
    splits : tuple of str
        Allowed split names; the first is the default.
    defaults : dict
        Dataset hyperparameters (``split``, ``split_seed``, ``shift``, ...);
        ``help`` and ``choices`` describe and restrict them (``split`` is
        restricted to :attr:`splits` automatically).
    parts : tuple of str
        Split parts every load returns: ``train``, ``valid``, ``test`` and, for
        OOD benchmarks with in-distribution hold-outs, ``id-valid`` and
        ``id-test`` (``valid``/``test`` are then the OOD parts).
    recommended : dict
        Model/training overrides the paper uses for this dataset, as dotted
        config keys (``{"encoder.layers": 4}``).
    selector_rules : dict
        Settings of a run with a selector on this dataset, as dotted config keys, that
        win over the preset's keys for every dataset (its ``all``); a preset's section
        for this dataset, a config file, the flags and ``-H`` win over them
        (:func:`grprune.resolve.resolve_config`). Your own data
        (:class:`FileDatasetSource`) selects among the epochs that use the selector:
        ``{"train.select_warmup": False}``.
    metric : str
        Evaluation metric of the returned dataset.
    num_classes : int
    description : str
        One line for listings.
    """

    splits: ClassVar[tuple[str, ...]] = ()
    parts: ClassVar[tuple[str, ...]] = ("train", "valid", "test")
    recommended: ClassVar[dict[str, Any]] = {}
    selector_rules: ClassVar[dict[str, Any]] = {}
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
        hint = did_you_mean(split, cls.splits)
        raise GrpruneError(
            f"unknown split {split!r} for dataset {cls.registered_name or cls.__name__}.{hint} "
            f"Choices: {', '.join(cls.splits)}"
        )

    @classmethod
    def resolve_params(cls, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The dataset's hyperparameters: :attr:`defaults` updated with ``params``.

        ``split`` is canonicalised with :meth:`resolve_split`; other values are
        coerced to the type of their default and checked against ``choices``.

        Raises
        ------
        GrpruneError
            On an unknown key (listing the known ones), an unknown split or a bad value.
        """
        params = dict(params or {})
        split = params.pop("split", None)
        if "shift" in params and "shift" not in cls.defaults:
            shifted = [n for n in DATASETS.names(load_plugins=False)
                       if "shift" in DATASETS.get(n).defaults]
            raise GrpruneError(
                f"dataset {cls.registered_name or cls.__name__} has no shift variants; "
                f"--shift applies to: {', '.join(shifted) or 'none'}")
        out = cls.resolve_hparams(params, prefix="data.")
        if "split" in cls.defaults or split is not None:
            out["split"] = cls.resolve_split(split)
        return out

    if TYPE_CHECKING:
        # each source's load takes its own keyword hyperparameters (module docstring),
        # not any **params: to type checkers the base only says what load returns
        load: Callable[..., GraphDataset]
    else:
        def load(self, *, root: Path, download: bool = False, **params: Any) -> "GraphDataset":
            """Load the dataset.

            Parameters
            ----------
            root : Path
                Data root: downloads and caches live under it.
            download : bool
                Fetch the original release instead of using bundled files.
            **params
                The hyperparameters of :attr:`defaults` (``split``, ``split_seed``,
                ...), already resolved by :meth:`resolve_params`.

            Returns
            -------
            GraphDataset

            Raises
            ------
            DataError
                On missing, corrupt or malformed data, or a failed download.
            """
            raise NotImplementedError


DATASETS.base = DatasetSource  # what every dataset registers: refused at registration otherwise

_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: Path) -> str:
    """Hex sha256 of a file's bytes, computed once per (path, size, mtime)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        from grprune.record.files import file_sha256
        _DIGESTS[key] = file_sha256(path)
    return _DIGESTS[key]


class FileDatasetSource(DatasetSource):
    """A dataset read from the user's file ``data.path`` (``molecule-csv``,
    ``dgl-graphs``).

    :meth:`resolve_params` makes the path absolute (a configuration replays from any
    directory) and records the file's sha256 as ``data.source_sha256``. The digest is
    part of the configuration, hence of the run's hash: a run on an edited file is a
    new run, never skipped as already finished. A digest given in a configuration (a
    previous run's ``config.json``) is replaced by the file's current one.

    A run with a selector selects among the epochs that use it (``train.select_warmup``
    false, :attr:`DatasetSource.selector_rules`), whatever the preset: a model selected
    at an ERM warm-up epoch would be ERM under the method's name. ``-H
    train.select_warmup=true`` lets warm-up epochs be selected again.
    """

    selector_rules: ClassVar[dict[str, Any]] = {"train.select_warmup": False}
    #: file name endings this source reads, lower case (``--data mols.csv`` picks the
    #: source whose ending matches: :func:`file_dataset`)
    suffixes: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def resolve_params(cls, params: dict[str, Any] | None = None) -> dict[str, Any]:
        out = super().resolve_params(params)
        if out.get("path"):
            from grprune.record.userfiles import expand_user
            path = expand_user(out["path"], "data.path").resolve()
            out["path"] = str(path)
            if path.is_file():
                out["source_sha256"] = file_digest(path)
        return out


def file_dataset(name: str) -> tuple[str, str] | None:
    """``--data FILE``: the registered :class:`FileDatasetSource` whose
    :attr:`~FileDatasetSource.suffixes` end ``name``, and the path, for a ``name`` that is
    not a dataset's name or alias; None for a dataset's name.

    >>> import tempfile
    >>> mols = Path(tempfile.mkdtemp()) / "mols.csv.gz"
    >>> _ = mols.write_bytes(b"")
    >>> file_dataset(str(mols))[0]
    'molecule-csv'
    >>> file_dataset("bbbp") is None
    True

    Raises
    ------
    GrpruneError
        When ``name`` is neither a dataset nor a file ending that a source reads (the
        message lists the datasets and the file endings), or names such a file that does
        not exist.
    """
    if name in DATASETS:
        return None
    sources = {n: DATASETS.get(n) for n in DATASETS.names()}
    readers = {n: c.suffixes for n, c in sources.items()
               if isinstance(c, type) and issubclass(c, FileDatasetSource) and c.suffixes}
    for dataset, endings in readers.items():
        if str(name).lower().endswith(endings):
            if not Path(name).expanduser().is_file():  # before any run or trial is planned
                raise GrpruneError(f"--data {name}: no such file (a file ending in "
                                   f"{', '.join(endings)} is read as {dataset})")
            return dataset, str(name)
    try:
        DATASETS.canonical(name)
    except GrpruneError as err:
        files = "; ".join(f"{', '.join(e)} ({n})" for n, e in readers.items())
        raise GrpruneError(f"{err}. Or a file: {files}") from None
    return None


def load_dataset(
    name: str,
    *,
    split: str | None = None,
    root: str | os.PathLike | None = None,
    download: bool = False,
    **params: Any,
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
    **params
        Other dataset hyperparameters (``split_seed``, ``shift``, ``bias``, ...;
        see ``grprune ls datasets``); unset ones take their defaults.

    Returns
    -------
    GraphDataset
        ``info`` records the source, skipped rows, split and split sizes.

    Raises
    ------
    GrpruneError
        Unknown dataset, split or hyperparameter name, or a bad value (the
        message lists the choices).
    DataError
        Missing, corrupt or malformed data, or a failed download.
    """
    cls = DATASETS.get(name)
    if split is not None:
        params["split"] = split
    resolved = cls.resolve_params(params)
    return cls().load(root=resolve_root(root), download=download, **resolved)
