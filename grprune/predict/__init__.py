"""Scoring new molecules with finished runs: ``grprune predict``, ``Run.predict`` and
:func:`grprune.api.predict_ensemble`.

:mod:`~grprune.predict.flow` owns the flow (a request checked, the run or ensemble it scores
with, streamed or in memory, the files written and the table printed); beneath it
:mod:`~grprune.predict.stream` screens a CSV library in chunks (featurized by
:mod:`~grprune.predict.pool`, scored by :mod:`~grprune.predict.chunk`, written and resumed
by :mod:`~grprune.predict.outputs`, reported by :mod:`~grprune.predict.progress`),
:mod:`~grprune.predict.memory` scores SMILES in memory, :mod:`~grprune.predict.ensemble`
holds the runs scored as one model, :mod:`~grprune.predict.columns` names the score columns
and :mod:`~grprune.predict.printed` lays out the rows the command prints.
"""
