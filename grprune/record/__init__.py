"""The run's records: the bottom layer of grprune, which every module may import.

It imports only :mod:`grprune.errors` and :mod:`grprune.hparams`, never a part, a dataset
or the resolver, so nothing above it can make an import cycle through it
(``tests/test_imports.py`` walks the import graph):

* :mod:`grprune.record.files`: run file names (and a sweep's ``sweep.json``), atomic
  writers (:func:`atomic_write_bytes`, :func:`atomic_write_json`, :func:`atomic_save`),
  the appender of JSON lines (:func:`append_record`, :func:`keep_records`), readers
  (:func:`read_json`, :func:`read_records`) and :func:`file_sha256`;
* :mod:`grprune.record.rundir`: :class:`~grprune.record.rundir.RunDir`, the one reader and
  writer of a run directory's files, and its lock;
* :mod:`grprune.record.status`: a run directory's state, judged from its files
  (:class:`~grprune.record.status.Status`), and the reader's probe of its lock;
* :mod:`grprune.record.locks`: the exclusive lock on a file (:func:`hold_lock`), a run
  directory's and a screen's output's;
* :mod:`grprune.record.trainstate`: what ``state.pt`` holds (:class:`TrainState`), and its
  checks;
* :mod:`grprune.record.error`: ``error.json`` (:class:`~grprune.record.error.ErrorRecord`);
* :mod:`grprune.record.settings`: the ``train``, ``model`` and ``data`` settings, their
  parsers (``-H`` overrides: :func:`~grprune.record.settings.parse_override`) and
  :func:`config_hash`;
* :mod:`grprune.record.userfiles`: files the user names (config files:
  :func:`~grprune.record.userfiles.load_config_file`);
* :mod:`grprune.record.runconfig`: the typed view of ``config.json`` (:class:`RunConfig`,
  its sections, :class:`FeatureSpec`);
* :mod:`grprune.record.summary`: ``summary.json`` (:class:`RunSummary`);
* :mod:`grprune.record.epoch`: a ``results.jsonl`` line (:class:`EpochRecord`).
"""

from grprune.record.files import (  # noqa: F401  (re-exported)
    append_record,
    atomic_save,
    atomic_save_to,
    atomic_write_bytes,
    atomic_write_json,
    file_sha256,
    keep_records,
    read_json,
    read_records,
    to_json,
    write_records,
)
from grprune.record.epoch import EpochRecord  # noqa: F401  (re-exported)
from grprune.record.error import ErrorRecord  # noqa: F401  (re-exported)
from grprune.record.runconfig import FeatureSpec, RunConfig  # noqa: F401  (re-exported)
from grprune.record.settings import (  # noqa: F401  (re-exported)
    OPTION_KEYS,
    config_hash,
    flat_items,
    lookup,
    same_run,
)
from grprune.record.summary import RunSummary  # noqa: F401  (re-exported)
