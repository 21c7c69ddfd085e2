"""Which preset each dataset split uses by default (``--preset auto``), decided on validation.

The rule (issue 13, item 5; prior moved to ``official`` by issue 39): for every dataset
column (dataset and split), compare each preset's mean PrunE validation score over seeds
with that of the prior (``official``, the recipe behind the published numbers), over the
runs that are a preset as it is (:func:`protocol_changes`; ablation runs in the same
directory are left out). A preset replaces the prior only when

* both settings have at least ``--min-seeds`` seeds (4), and
* its mean validation score is higher by at least ``--z`` (2) standard errors of the
  difference, Welch's form: ``(m_a - m_b) / sqrt(s_a**2 / n_a + s_b**2 / n_b) >= z``
  (sample standard deviations, ``ddof=1``).

Only runs under the preset's own protocol can set a default: runs with fewer graphs or
epochs (the CPU-sized protocol, ``data.limit``) are decided and reported the same way,
marked "shortened protocol", and left out of the ``defaults.yaml`` entries.

ERM's validation scores under each preset's model are reported beside PrunE's, for the
record. They do not enter the rule: the default is the recipe PrunE runs with, and the
earlier clause that ERM must not argue against a switch kept ``paper`` on GOOD-Motif size,
where PrunE ``official`` led on validation by z = 6.08 (defaults-evidence.md). Test scores
are printed for the record and never read by the rule.

Usage::

    python -m benchmarks.accuracy.prune.choose runs/prune-molbbbp runs/prune-motif --out \\
        benchmarks/accuracy/prune/defaults/defaults-evidence.md

A source may also be a GOOD-Motif ``.runs.csv`` that ``ablation.py table`` wrote (or one made
the same way), so that a decision can be re-read after the run directories are gone. Only its
rows labelled as a preset as it is count (``official``, ``paper``, ``ERM (official model)``,
``ERM (paper model)``); ``--csv-protocol`` says which protocol its runs had (``cpu``, the
default: shortened, never applied; ``full``: the presets' own).

Sources are read in the order given: run directories first, then the tables, each table's
setting (column, method and preset) replacing the same setting of an earlier source, so the
newest evidence goes last (a ``table1.py runs`` table made at HEAD after the tables of older
commits).

It prints a Markdown table and the ``grprune/presets/defaults.yaml`` entries the rule
gives; it writes nothing else.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from benchmarks.accuracy.mdtable import TEXT_COLUMNS

FALLBACK = "official"

#: keys a study's protocol may set on top of a preset (the CPU-sized protocol's)
PROTOCOL_KEYS = ("data.limit", "train.epochs", "train.warmup_epochs", "train.patience",
                 "train.eval_train")


#: protocol keys that do not change what is trained (only what is evaluated, and when)
HARMLESS = ("train.eval_train",)


def protocol_changes(run, protocol_keys=PROTOCOL_KEYS) -> set[str] | None:
    """How ``run`` (a :class:`grprune.collect.Run`) departs from its preset as it is: the
    keys in which its configuration differs from a fresh resolution of that preset (same
    dataset, split, regularizers, selector), when all of them are ``protocol_keys``;
    ``None`` when others differ too (an ablation run)."""
    from grprune.collect import flatten_config
    from grprune.resolve import resolve_config
    ref = flatten_config(resolve_config(
        data=run.dataset, reg=",".join(run.reg) or "none", selector=run.selector,
        preset=run.preset, flags={"data.split": run.split} if run.split else {}))
    differ = {k for k in ref.keys() | run.hparams.keys() if ref.get(k) != run.hparams.get(k)}
    return differ if differ <= set(protocol_keys) else None


def margin(a: tuple[float, float, int], b: tuple[float, float, int]) -> float:
    """Welch's z of mean ``a`` over mean ``b``: ``(m_a - m_b) / sqrt(s_a²/n_a + s_b²/n_b)``.

    Each argument is ``(mean, sample std, n)``. Infinite when both stds are 0 (and the
    means differ), NaN when either side has fewer than 2 seeds.

    >>> round(margin((0.8659, 0.0229, 4), (0.8368, 0.0146, 4)), 2)
    2.14
    >>> margin((0.9, 0.0, 4), (0.8, 0.0, 4))
    inf
    """
    (ma, sa, na), (mb, sb, nb) = a, b
    if na < 2 or nb < 2 or math.isnan(ma) or math.isnan(mb):
        return math.nan  # a single seed has no sample std
    se = math.sqrt(sa ** 2 / na + sb ** 2 / nb)
    if se == 0:
        return math.copysign(math.inf, ma - mb) if ma != mb else 0.0
    return (ma - mb) / se


def decide(rows: list[dict], z: float = 2.0, min_seeds: int = 4) -> list[dict]:
    """One decision per dataset column from :func:`grprune.collect.aggregate` rows
    (``select="all", presets="select"``: one row per setting, the method named without
    its preset).

    Returns
    -------
    list of dict
        ``column``, ``preset`` (the proposed default), ``prune`` and ``erm``
        (preset -> (valid mean, std, n, test mean, test std)), ``z_prune`` and ``z_erm``
        (preset -> Welch's z against the fallback) and ``why``.
    """
    by_column: dict[str, dict[str, dict]] = {}
    for r in rows:
        base = {"PrunE": "prune", "ERM": "erm"}.get(r["method"])
        if base is None:
            continue
        cell = (r["valid_mean"], r["valid_std"], r["n"], r["test_mean"], r["test_std"])
        by_column.setdefault(r["column"], {"prune": {}, "erm": {}})[base][r["preset"]] = cell
    out = []
    for column, got in sorted(by_column.items()):
        zs = {m: {p: margin(v[:3], got[m][FALLBACK][:3]) for p, v in got[m].items()
                  if p != FALLBACK and FALLBACK in got[m]} for m in ("prune", "erm")}
        chosen, why = FALLBACK, (f"no preset other than {FALLBACK} was run"
                                 if FALLBACK in got["prune"] else f"{FALLBACK} was not run")
        for preset, zp in sorted(zs["prune"].items(), key=lambda kv: -kv[1]):
            seeds = min(got["prune"][preset][2], got["prune"][FALLBACK][2])
            ze = zs["erm"].get(preset, math.nan)
            if seeds < min_seeds:
                why = f"{preset}: {seeds} seeds, fewer than {min_seeds}"
            elif not zp >= z:
                why = f"{preset}: PrunE's validation margin z = {zp:.2f} < {z:g}"
            else:
                chosen, why = preset, f"{preset}: PrunE z = {zp:.2f} >= {z:g} (ERM z = {ze:.2f})"
            break
        out.append({"column": column, "preset": chosen, "prune": got["prune"],
                    "erm": got["erm"], "z_prune": zs["prune"], "z_erm": zs["erm"], "why": why,
                    "applies": True})
    return out


def rows_from_runs_csv(paths: list[Path]) -> list[dict]:
    """:func:`decide`'s rows from GOOD-Motif ``.runs.csv`` files (``ablation.py`` columns
    ``split``, ``label``, ``seed``, ``valid``, ``test``): one row per (split, method, preset)
    over the labels of ``ablation.PRESET_LABELS``; other labels (ablations) are left out. A (split,
    label, seed) found in two files keeps the first file's row.

    Raises
    ------
    SystemExit
        (code 2) when a file is missing or lacks one of those columns.
    """
    import pandas as pd
    if not paths:
        return []
    for path in paths:  # ablation.gather fills absent columns with NaN: check them first
        try:
            columns = pd.read_csv(path, nrows=0).columns
        except (OSError, pd.errors.ParserError) as exc:
            print(f"choose.py: cannot read {path}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        missing = {"split", "label", "seed", "valid", "test"} - set(columns)
        if missing:
            print(f"choose.py: {path} lacks the columns {sorted(missing)}", file=sys.stderr)
            raise SystemExit(2)
    # the study's own reader pools the files (the first file's row of a seed wins)
    from benchmarks.accuracy.prune import ablation
    runs = ablation.gather(paths)
    runs = runs[runs["label"].isin(list(ablation.PRESET_LABELS))]
    rows = []
    for (split, label), g in runs.groupby(["split", "label"]):
        method, preset = ablation.PRESET_LABELS[label]
        rows.append({"column": f"good-motif/{split}", "method": method, "preset": preset,
                     "valid_mean": g["valid"].mean(), "valid_std": g["valid"].std(ddof=1),
                     "n": len(g), "test_mean": g["test"].mean(),
                     "test_std": g["test"].std(ddof=1)})
    return rows


#: the committed tables besides the GOOD-Motif ``.runs.csv``: header columns that tell them
TABLE_KINDS = {"runs": {"dataset", "split", "method", "preset", "protocol", "seed", "valid",
                        "test"},
               "collect": {"column", "method", "preset", "n", "valid_mean", "valid_std",
                           "test_mean", "test_std"}}


def _source(arg: Path, default: str) -> tuple[Path, str]:
    """``FILE.csv:full`` -> (FILE.csv, "full"); anything else -> (arg, default)."""
    text = str(arg)
    for protocol in ("full", "cpu"):
        if text.endswith(f".csv:{protocol}"):
            return Path(text[: -len(protocol) - 1]), protocol
    return arg, default


def _header(path: Path) -> set[str]:
    import pandas as pd
    try:
        return set(pd.read_csv(path, nrows=0).columns)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        print(f"choose.py: cannot read {path}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def rows_from_table(path: Path, protocol: str) -> tuple[list[dict], list[dict]]:
    """:func:`decide`'s rows from one committed table, as (full, shortened): a
    ``table1.py runs`` file (one row per run, its protocol per row; ``paper`` is full) or a
    ``grprune collect --select all --layout long`` table (one row per setting; all of it
    under ``protocol``, ``full`` or ``cpu``).

    Raises
    ------
    SystemExit
        (code 2) when the file can't be read or is neither kind.
    """
    import pandas as pd
    try:
        df = pd.read_csv(path, dtype=TEXT_COLUMNS)
    except (OSError, pd.errors.ParserError) as exc:
        print(f"choose.py: cannot read {path}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    full, short = [], []
    if TABLE_KINDS["runs"] <= set(df.columns):
        for (ds, split, method, preset, proto), g in df.groupby(
                ["dataset", "split", "method", "preset", "protocol"]):
            (full if proto == "paper" else short).append(
                {"column": f"{ds}/{split}", "method": method, "preset": preset,
                 "valid_mean": g["valid"].mean(), "valid_std": g["valid"].std(ddof=1),
                 "n": len(g), "test_mean": g["test"].mean(), "test_std": g["test"].std(ddof=1)})
    elif TABLE_KINDS["collect"] <= set(df.columns):
        for r in df.itertuples():
            (full if protocol == "full" else short).append(
                {"column": r.column, "method": r.method.split(" (")[0], "preset": r.preset,
                 "valid_mean": r.valid_mean, "valid_std": r.valid_std, "n": int(r.n),
                 "test_mean": r.test_mean, "test_std": r.test_std})
    else:
        print(f"choose.py: {path} is neither a table1.py runs table nor a collect --layout "
              f"long table", file=sys.stderr)
        raise SystemExit(2)
    return full, short


def _test(v: tuple) -> str:
    return f"{100 * v[3]:.2f}" + ("" if v[2] < 2 else f" ± {100 * v[4]:.2f}")


def _cell(v: tuple | None) -> str:
    if v is None:
        return "–"
    if v[2] < 2:  # one seed has no sample std
        return f"{100 * v[0]:.2f} (n={v[2]})"
    return f"{100 * v[0]:.2f} ± {100 * v[1]:.2f} (n={v[2]})"


def markdown(decisions: list[dict]) -> str:
    """The evidence table (validation ×100, Welch's z against the prior, ``official``) and the
    ``defaults.yaml`` entries."""
    lines = [f"| dataset/split | method | preset | valid | z vs {FALLBACK} | test (not used) |",
             "|---|---|---|---|---|---|"]
    for d in decisions:
        for method, key in (("PrunE", "prune"), ("ERM", "erm")):
            for preset, v in sorted(d[key].items()):
                z = d[f"z_{key}"].get(preset)
                lines.append(f"| {d['column']} | {method} | {preset} | {_cell(v)} | "
                             f"{'–' if z is None or math.isnan(z) else f'{z:+.2f}'} | "
                             f"{_test(v)} |")
    lines += ["", "Decisions (rule: benchmarks/accuracy/prune/choose.py):", ""]
    lines += [f"- {d['column']}: **{d['preset']}** ({d['why']})"
              + ("" if d["applies"] else ", not applied")
              for d in decisions]
    entries = [f"{d['column']}: {d['preset']}" for d in decisions
               if d["preset"] != FALLBACK and d["applies"]]
    lines += ["", "defaults.yaml entries:", "", "```yaml", *(entries or ["{}"]), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path,
                    help="run directories (or folders of them) and committed tables: "
                         "GOOD-Motif .runs.csv (ablation.py), table1.py runs tables, collect "
                         "--layout long tables; FILE.csv:full or :cpu gives a table's protocol")
    ap.add_argument("--csv-protocol", choices=("cpu", "full"), default="cpu",
                    help="the protocol of the tables given without one (cpu: shortened)")
    ap.add_argument("--z", type=float, default=2.0)
    ap.add_argument("--min-seeds", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from grprune import collect as C
    # runs that are a preset as it is (ablation runs are left out), split by whether they
    # trained under a shortened protocol (fewer graphs or epochs than the preset's own)
    # FILE.csv:full or FILE.csv:cpu states one table's protocol (else --csv-protocol)
    sources = [_source(p, args.csv_protocol) for p in args.dirs]
    dirs = [p for p, _ in sources if p.suffix != ".csv"]
    full, short = [], []
    for run in (C.scan_runs(dirs).runs if dirs else []):
        changes = protocol_changes(run)
        if changes is not None:
            (short if changes - set(HARMLESS) else full).append(run)

    def rows(runs):
        return C.aggregate(runs, select="all", presets="select") if runs else []

    # sources in the order given, a later one's setting replacing an earlier one's
    # (decide keeps the last row of a column, method and preset): newest evidence last
    full_rows, short_rows = rows(full), rows(short)
    for path, protocol in sources:
        if path.suffix != ".csv":
            continue
        if path.is_file() and "label" not in _header(path):
            more_full, more_short = rows_from_table(path, protocol)
        else:  # an ablation.py study table (GOOD-Motif): its preset rows
            more_full, more_short = (rows_from_runs_csv([path]), []) if protocol == "full" \
                else ([], rows_from_runs_csv([path]))
        full_rows, short_rows = full_rows + more_full, short_rows + more_short
    decisions = decide(full_rows, args.z, args.min_seeds)
    for d in decide(short_rows, args.z, args.min_seeds):
        d["column"] += " (shortened protocol)"
        decisions.append({**d, "applies": False})
    text = markdown(decisions)
    sys.stdout.write(text)
    if args.out:
        from grprune.record.files import atomic_write_bytes
        atomic_write_bytes(args.out, text.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
