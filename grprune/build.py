"""What a resolved configuration names, built: its dataset (:func:`load_config_dataset`), and
its model and regularizers (:func:`build_model`, or :func:`build_model_from_features` from a
stored run's :class:`~grprune.record.runconfig.FeatureSpec`, without the data).

Training (:class:`grprune.trainer.Trainer`) and using a finished run
(:mod:`grprune.inference`) both build here, so that loading a model imports no training.
Importing it imports no torch, no part and no dataset: each function imports what it builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from grprune.record.runconfig import FeatureSpec, RunConfig

if TYPE_CHECKING:  # the parts import torch: what builds them imports them when it runs
    from grprune.model import GraphClassifier
    from grprune.regularizers.base import Regularizer


def data_root(cfg: RunConfig) -> Path:
    """The data root a resolved config reads (``data.root``, else ``$GRPRUNE_DATA_ROOT``,
    else ``~/.cache/grprune/data``), ``~`` expanded.

    Raises
    ------
    GrpruneError
        A ``~user`` that names no user, or ``~`` without a home directory.
    """
    from grprune.data.registry import resolve_root
    return resolve_root(cfg.data.root or None)


def load_config_dataset(cfg: RunConfig, root: Path | None = None):
    """The dataset a resolved config trains on (``data.limit`` is applied by the trainer),
    from ``root`` (default :func:`data_root`)."""
    from grprune.data.registry import load_dataset
    data = cfg.data
    return load_dataset(data.name, root=root or data_root(cfg), download=bool(data.download),
                        **data.params)


def build_model_from_features(cfg: RunConfig, features: FeatureSpec
                              ) -> tuple[GraphClassifier, dict[str, Regularizer]]:
    """Instantiate selector, encoder, classifier and regularizers from a resolved config
    and the data's :class:`~grprune.record.runconfig.FeatureSpec` (``cfg.features`` of a
    stored run), without the data.

    Parameters
    ----------
    cfg : RunConfig
        A resolved configuration (a stored ``config.json`` through
        :meth:`RunConfig.from_dict`).
    features : FeatureSpec
        The training data's feature sizes and classes; a ``features`` record (a dict) is
        read with :meth:`FeatureSpec.from_dict`.
    """
    from grprune.encoders.base import ENCODERS
    from grprune.model import GraphClassifier
    from grprune.regularizers.base import REGULARIZERS
    from grprune.selectors.base import SELECTORS
    if not isinstance(features, FeatureSpec):
        features = FeatureSpec.from_dict(features)
    feat, enc, sel, head = features.model_kwargs(), cfg.encoder, cfg.selector, cfg.model
    encoder = ENCODERS.make(enc.name, **feat, **enc.hparams)
    selector = SELECTORS.make(sel.name, **feat, **sel.hparams) if sel.name != "none" else None
    model = GraphClassifier(encoder, features.classes, selector, readout=head.readout,
                            head_layers=head.head_layers, task=features.task,
                            target_mean=features.target_mean, target_std=features.target_std)
    regs = {name: REGULARIZERS.make(name, **hp) for name, hp in cfg.reg.items()}
    return model, regs


def build_model(cfg: RunConfig, dataset) -> tuple[GraphClassifier, dict[str, Regularizer]]:
    """Instantiate selector, encoder, head and regularizers from a resolved config and the
    data.

    Raises
    ------
    GrpruneError
        If a regularizer does not support the selector or the dataset
        (:meth:`Regularizer.supports`, e.g. environment ids on a dataset with one),
        before anything is built.
    """
    from grprune.regularizers.base import REGULARIZERS, check_supports
    check_supports({name: REGULARIZERS.get(name) for name in cfg.reg},
                   cfg.selector.name, dataset)
    return build_model_from_features(cfg, FeatureSpec.of(dataset))
