"""Which of the official code's choices make PrunE prune: ablation in both directions.

Every choice where the official code (``--preset official``) differs from the paper text
(``--preset paper``) is one row of :data:`CHOICES`: the keys it sets and their official
values. The ablation takes the official preset and puts one choice back to the paper's
values (``official - choice``), and takes the paper preset and sets one choice to the
official values (``paper + choice``).

Usage::

    # write the sweep specs (one per direction and split), then run them
    python -m benchmarks.accuracy.prune.ablation spec --direction remove --splits basis \\
        --seeds 0-1 --out benchmarks/accuracy/prune/motif-cpu/motif-cpu-remove-basis.yaml
    grprune sweep --spec benchmarks/accuracy/prune/motif-cpu/motif-cpu-remove-basis.yaml --out runs/prune-motif --workers 2
    # the table: one row per setting, mean +- std over seeds, valid and test, diagnostics
    python -m benchmarks.accuracy.prune.ablation table runs/prune-motif --out benchmarks/accuracy/prune/motif-cpu/motif-cpu
    # one direction on one split in the README's shorter form, from the committed rows
    python -m benchmarks.accuracy.prune.ablation summary benchmarks/accuracy/prune/motif-cpu/motif-cpu-size.runs.csv \
        --split size --direction add

The protocol is that of ``motif-cpu-base.yaml`` (:data:`PROTOCOL`). Rows are labelled by
comparing each run's resolved configuration with the two presets' (same dataset, split
and regularizers), so a run is named by what it is, not by how it was asked for.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from benchmarks.accuracy.mdtable import TEXT_COLUMNS

#: choice -> {key: official value}; the paper value is whatever the paper preset resolves to
CHOICES: dict[str, dict[str, Any]] = {
    "L_e form": {"reg.size.form": "official"},
    "L_s form": {"reg.eps-align.form": "official"},
    "L_s K, lambda2 (90, 0.001)": {"reg.eps-align.k": 90.0, "reg.eps-align.weight": 0.001},
    "sample per edge": {"selector.sample_per": "edge"},
    "logit MLP(sum)": {"selector.symmetrize": "sum-input"},
    "tau 0.2": {"selector.tau": 0.2},
    "sampled evaluation": {"selector.eval_mode": "sample"},
    "ReLU((h+e)w)": {"encoder.edge_mask": "before-relu"},
    "no ReLU between layers": {"encoder.layer_relu": False, "selector.layer_relu": False},
    "L2-normalised readout": {"model.readout": "sum-l2"},
    "3-layer head": {"model.head_layers": 3},
    "xavier init": {"encoder.init": "xavier", "selector.init": "xavier"},
    "dropout 0": {"encoder.dropout": 0.0},
    "weight decay 1e-6": {"train.weight_decay": 1e-6},
    "warm-up selectable": {"train.select_warmup": True},
    "model 3 x 128": {"encoder.layers": 3, "encoder.hidden": 128, "selector.hidden": 128},
}

#: the CPU-sized protocol shared by every run (see motif-cpu-base.yaml)
PROTOCOL = {"data.limit": 3000, "train.epochs": 30, "train.warmup_epochs": 10,
            "train.patience": 0, "train.eval_train": False}
#: the paper's protocol (all graphs, each preset's own schedule; see motif-full.yaml)
FULL_PROTOCOL = {"train.eval_train": False}
#: ``table --protocol`` -> the overrides every run of that protocol shares
PROTOCOLS = {"cpu": PROTOCOL, "full": FULL_PROTOCOL}


def _paper_values(data: str, split: str) -> dict[str, Any]:
    from grprune.resolve import resolve_config
    cfg = resolve_config(data=data, reg="size,eps-align", preset="paper",
                         flags={"data.split": split})
    return {key: _get(cfg, key) for keys in CHOICES.values() for key in keys}


def _get(cfg: dict, key: str) -> Any:
    section, _, rest = key.partition(".")
    if section == "reg":
        name, _, hp = rest.partition(".")
        return cfg["reg"].get(name, {}).get(hp)
    return cfg[section].get(rest)


def write_spec(direction: str, data: str, splits: list[str], seeds: str, out: Path) -> None:
    """A sweep spec with one grid per choice."""
    import yaml
    grids = []
    for split in splits:
        paper = _paper_values(data, split)
        for name, official in CHOICES.items():
            if direction == "remove":
                preset, values = "official", {k: paper[k] for k in official}
            else:
                preset, values = "paper", dict(official)
            grids.append({"data": data, "split": split, "preset": preset,
                          "reg": ["size,eps-align"], "seeds": seeds,
                          "hparams": {**PROTOCOL, **values}})
    head = (f"# {'official - choice' if direction == 'remove' else 'paper + choice'}, one grid "
            f"per choice of benchmarks/accuracy/prune/ablation.py (written by its `spec` "
            f"command)\n")
    out.write_text(head + yaml.safe_dump(grids, sort_keys=False))
    print(f"wrote {out}: {len(grids)} grids")


_IGNORED = {"train.seed", "train.device", "train.progress", "train.loader_workers"}


def _flat(cfg: dict) -> dict[str, Any]:
    """The settings of a config that make one run differ from another (no data, seed)."""
    from grprune.record.runconfig import RunConfig
    cfg = RunConfig.from_dict(cfg)
    out = {f"{s}.{k}": v for s in ("selector", "encoder", "model", "train")
           for k, v in cfg[s].items()}
    out.update({f"reg.{n}.{k}": v for n, hp in cfg["reg"].items() for k, v in hp.items()})
    return {k: v for k, v in out.items() if k not in _IGNORED}


def label(cfg: dict, protocol: dict[str, Any] = PROTOCOL) -> str:
    """The row of a run: ``official``, ``paper``, ``official - CHOICE`` (the choice at the
    paper's values), ``paper + CHOICE`` (at the official values), ``ERM (official model)``,
    ``ERM (paper model)``, ``SELECTOR selector (official model)`` for a selector other than
    the presets' without regularizers (the oracle of ``oracle.py``), or
    ``PRESET with key=value, ...`` for anything else (against the nearer preset), all
    relative to ``protocol``'s overrides."""
    from grprune.resolve import resolve_config
    reg = ",".join(cfg["reg"]) or "none"
    flags = {"data.split": cfg["data"].get("split")}
    overrides = [f"{k}={v}" for k, v in protocol.items()]
    selector = cfg["selector"].get("name") if reg == "none" else None
    refs = {p: _flat(resolve_config(data=cfg["data"]["name"], reg=reg, preset=p, flags=flags,
                                    overrides=overrides, selector=selector))
            for p in ("official", "paper")}
    run = _flat(cfg)
    diffs = {p: {k for k in run.keys() | ref.keys() if run.get(k) != ref.get(k)}
             for p, ref in refs.items()}
    for preset, diff in diffs.items():
        if not diff:
            if reg != "none":
                return preset
            if selector and selector != "none":
                return f"{selector} selector ({preset} model)"
            return f"ERM ({preset} model)"
    named = {}  # preset -> the choices that make up the whole difference from it
    for preset, diff in diffs.items():
        other = refs["paper" if preset == "official" else "official"]
        names = [name for name, keys in CHOICES.items()
                 if set(keys) <= diff and all(run[k] == other[k] for k in keys)]
        if names and set().union(*(CHOICES[n] for n in names)) == diff:
            named[preset] = names
    if named:
        preset = min(named, key=lambda p: len(named[p]))
        sign = " - " if preset == "official" else " + "
        return preset + sign + sign.join(named[preset])
    preset = min(diffs, key=lambda p: len(diffs[p]))
    head = (f"{selector} selector ({preset} model)" if selector and selector != "none"
            else preset)
    return f"{head} with " + ", ".join(f"{k}={run.get(k)}" for k in sorted(diffs[preset]))


def _spurious_share(run_dir: Path) -> float | None:
    """Share of spurious (non-motif) edges among the test edges of ``edge_probs.npz``: what
    Precision@K is for a selector that ranks at random (the paper's Motif-base table implies
    0.61, from Precision@50 0.9017 and Recall@50 0.7356)."""
    import numpy as np
    path = Path(run_dir) / "edge_probs.npz"
    if not path.exists():
        return None
    with np.load(path) as z:
        return float(np.mean(z["edge_gt"] == 0)) if "edge_gt" in z.files else None


#: the runs that are a preset as it is: ``label`` -> (method, preset)
PRESET_LABELS = {"official": ("PrunE", "official"), "paper": ("PrunE", "paper"),
                 "ERM (official model)": ("ERM", "official"),
                 "ERM (paper model)": ("ERM", "paper")}
#: ``table --protocol`` -> the ``protocol`` column of its rows (``table1.py``'s words)
PROTOCOL_NAMES = {"full": "paper", "cpu": "shortened"}
#: the columns of a ``.runs.csv``, in order: ``table1.py``'s per-run format
#: (``table1.RUN_FIELDS``, which ``table1.py`` reads with its one reader), then the
#: study's own: ``label``, the setting (:func:`label`); the selector diagnostics;
#: ``kernels``, torch's CPU kernels, which round differently (``AVX2`` or ``AVX512``);
#: ``cpu``, the processor, e.g. ``AMD EPYC``, since runs repeat exactly only on one
#: vendor's CPUs (docs/outputs.md); ``gpu``, the GPU that trained the run, empty for a run
#: on the CPU. ``method`` and ``preset`` are :data:`PRESET_LABELS`' for a preset as it is;
#: an ablated run's ``preset`` is its label, so that no preset's cell takes it in. Columns
#: a row predates the record of (``cpu``, ``commit``, ``config_hash``, ...) are empty.
COLUMNS = ["dataset", "split", "method", "preset", "protocol", "seed", "valid", "test",
           "id_test", "kept", "best_epoch", "commit", "hardware", "selected_phase",
           "config_hash", "label", "motif_rocauc", "p50", "r50", "spurious",
           "id_valid_rocauc", "kernels", "cpu", "gpu"]


def method_preset(label: str) -> tuple[str, str]:
    """A row's ``(method, preset)`` from its :func:`label`: :data:`PRESET_LABELS`' for a
    preset as it is, else (``PrunE``, ``ERM`` or ``SELECTOR selector``, the label).

    >>> method_preset("ERM (paper model)"), method_preset("paper + tau 0.2")
    (('ERM', 'paper'), ('PrunE', 'paper + tau 0.2'))
    """
    if label in PRESET_LABELS:
        return PRESET_LABELS[label]
    if label.startswith("ERM"):
        return "ERM", label
    if " selector (" in label:
        return label.split(" (")[0], label
    return "PrunE", label


def hardware(cpu_count, cpu, gpu, kernels) -> str:
    """A run's hardware in ``table1.py``'s words: the GPU that trained it, else
    ``N cores of an CPU (CPU)``, with ``, AVX-512 kernels`` where torch used them (grprune
    pins AVX2); empty when the run predates the record of its processor."""
    def known(value):
        return isinstance(value, str) and value != ""
    if known(gpu):
        return gpu
    if not known(cpu):
        return ""
    return (f"{cpu_count} cores of an {cpu} (CPU)"
            + (", AVX-512 kernels" if kernels == "AVX512" else ""))


def _run_rows(dirs: list[Path], protocol: str) -> list[dict[str, Any]]:
    """One row per finished run under ``dirs`` (see :data:`COLUMNS`)."""
    from grprune.collect import scan_runs
    _register_oracle()
    rows = []
    for run in scan_runs(dirs).runs:
        s = run.summary
        diag, env = s.selector_diagnostics or {}, s.environment or {}
        on_gpu = str(s.device or "").startswith("cuda")
        name = label(run.config, PROTOCOLS[protocol])
        method, preset = method_preset(name)
        kernels = (s.determinism or {}).get("cpu_capability")
        gpu = env.get("gpu") if on_gpu else None
        rows.append({"dataset": run.dataset, "split": run.split, "method": method,
                     "preset": preset, "protocol": PROTOCOL_NAMES[protocol],
                     "seed": run.seed, "valid": s.valid, "test": s.test, "id_test": s.id_test,
                     "kept": s.kept_edge_fraction, "best_epoch": s.best_epoch,
                     "commit": env.get("commit"),
                     "hardware": hardware(env.get("cpu_count", "?"), env.get("cpu"), gpu,
                                          kernels),
                     "selected_phase": s.selected_phase, "config_hash": s.config_hash,
                     "label": name,
                     "motif_rocauc": s.motif_edge_rocauc,
                     "p50": s.spurious_precision_at_50,
                     "r50": (diag.get("test") or {}).get("recall@50"),
                     "spurious": _spurious_share(run.path),
                     "id_valid_rocauc": (diag.get("id-valid") or {}).get("motif_rocauc"),
                     "kernels": kernels, "cpu": env.get("cpu"), "gpu": gpu})
    return rows


def gather(sources: list[Path], protocol: str = "cpu"):
    """The runs of ``sources`` as one table (a pandas DataFrame with :data:`COLUMNS`).

    A source is a run directory (or a folder of them), read as :func:`table` labels runs,
    or a ``.runs.csv`` that an earlier ``table`` wrote, so that a study can grow over
    sessions whose run directories are gone. A (split, label, seed) measured more than once
    keeps the row of the first source that has it, so list the runs of record first.
    """
    import pandas as pd
    frames = []
    for path in sources:  # in the order given: the first source of a row wins
        if path.suffix != ".csv":
            frames.append(pd.DataFrame(_run_rows([path], protocol), columns=COLUMNS))
        elif path.is_file():
            frames.append(pd.read_csv(path, dtype=TEXT_COLUMNS).reindex(columns=COLUMNS))
        else:
            print(f"ablation.py: no such file: {path}", file=sys.stderr)
            sys.exit(2)
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.concat(frames, ignore_index=True)
    df["seed"] = df["seed"].astype(int)
    return df.drop_duplicates(["split", "label", "seed"], keep="first").reset_index(drop=True)


def fmt(values, scale: float, digits: int | None = None) -> str:
    """``mean ± sample std`` of ``values`` times ``scale``, skipping missing ones: 2 digits
    for percentages (``scale`` 100), else 3 unless ``digits`` says; the mean alone for one
    value, ``–`` for none."""
    import numpy as np
    v = [x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return "–"
    digits = digits if digits is not None else (2 if scale == 100 else 3)
    m = np.mean(v) * scale
    if len(v) == 1:  # one seed: no spread to give
        return f"{m:.{digits}f}"
    sd = np.std(v, ddof=1) * scale
    return f"{m:.{digits}f} ± {sd:.{digits}f}"


def table(dirs: list[Path], out: Path | None, protocol: str = "cpu") -> None:
    """Markdown and CSV: one row per (split, label), mean +- sample std over seeds. ``dirs``
    are run directories and earlier ``.runs.csv`` files (:func:`gather`). The text before
    the first ``### `` heading of an existing ``.md`` is kept."""
    df = gather(dirs, protocol)
    if df.empty:
        sys.exit("no finished runs")
    from grprune.record.files import atomic_write_bytes  # a study's files are never left half-written
    if out:
        atomic_write_bytes(out.with_suffix(".runs.csv"), df.to_csv(index=False).encode())
    else:
        df.to_csv(sys.stdout, index=False)
    metrics = ["valid", "test", "id_test", "kept", "motif_rocauc", "p50", "r50", "spurious",
               "id_valid_rocauc"]

    order = (["ERM (official model)", "ERM (paper model)", "official", "paper"]
             + [f"official - {n}" for n in CHOICES] + [f"paper + {n}" for n in CHOICES])
    order += sorted(set(df["label"]) - set(order))
    lines = []
    for split, part in df.groupby("split", sort=True):
        lines += [f"\n### GOOD-Motif {split}\n",
                  "| setting | seeds | OOD-valid | OOD-test | ID-test | test edges kept | "
                  "motif ROC-AUC (test) | Precision@50 (test) | Recall@50 (test) | "
                  "spurious share (test) | motif ROC-AUC (ID-valid) | machine |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name in order:
            g = part[part["label"] == name]
            if g.empty:
                continue
            cells = [fmt(g[m], 100 if m in ("valid", "test", "id_test") else 1) for m in metrics]
            cells.append(_machines(g) or "–")
            lines.append(f"| {name} | {len(g)} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    if out:
        md = out.with_suffix(".md")
        # a hand-written preamble (what ran, where, at which commit) survives regeneration
        old = md.read_text() if md.exists() else ""
        preamble = old[:old.index("\n### ")].rstrip("\n") if "\n### " in old else ""
        atomic_write_bytes(md, ((preamble + "\n" if preamble else "") + text).encode())
        print(f"wrote {md} and {out.with_suffix('.runs.csv')}")
    print(text)


#: ``summary --columns`` name -> (its header, a function from one row's runs, a DataFrame,
#: to its cell)
SUMMARY_COLUMNS = {
    "valid": ("OOD-valid", lambda g: fmt(g["valid"], 100)),
    "test": ("OOD-test", lambda g: fmt(g["test"], 100)),
    "prune": ("runs that prune", lambda g: f"{int(prunes(g).sum())} of {len(g)}"),
    "kept": ("test bonds kept", lambda g: fmt(g["kept"], 1)),
    "p50": ("Precision@50", lambda g: fmt(g["p50"], 1)),
    "motif_rocauc": ("motif ROC-AUC (test)", lambda g: fmt(g["motif_rocauc"], 1, digits=2)),
    "per_seed": ("OOD-test per seed",
                 lambda g: ", ".join(f"{t * 100:.1f}" for t in g.sort_values("seed")["test"])),
}


def prunes(rows):
    """Whether each run of ``rows`` prunes, the README's rule: it keeps under 60 % of the
    OOD-test bonds at Precision@50 ≥ 0.88 (a boolean Series; a missing value is False)."""
    return (rows["kept"] < 0.60) & (rows["p50"] >= 0.88)


def summary(sources: list[Path], split: str, direction: str,
            columns: list[str] = ("valid", "test", "kept", "motif_rocauc", "per_seed"),
            protocol: str = "cpu") -> str:
    """One direction of the ablation on one split, as the markdown table of
    ``prune/motif-cpu/README.md``: ERM with the base preset's model, the base preset (``none``), the
    other preset (``all of them``), then each set of choices that was ablated together,
    then each of :data:`CHOICES` in order; a row per setting with runs, cells as
    :data:`SUMMARY_COLUMNS` (mean ± sample std over seeds). ``direction`` ``add`` starts
    from ``paper``, ``remove`` from ``official``; ``sources`` are read by :func:`gather`.

    Raises:
        ValueError: an unknown ``direction`` or column.
    """
    if direction not in ("add", "remove"):
        raise ValueError(f"direction must be add or remove, not {direction!r}")
    unknown = [c for c in columns if c not in SUMMARY_COLUMNS]
    if unknown:
        raise ValueError(f"unknown column {unknown[0]!r}; choose from "
                         + ", ".join(SUMMARY_COLUMNS))
    df = gather(sources, protocol)
    df = df[df["split"] == split]
    base, other, sign = (("paper", "official", " + ") if direction == "add"
                         else ("official", "paper", " - "))
    rows = [(f"ERM ({base} model)", f"ERM ({base} model)"), (base, f"none (`{base}`)"),
            (other, f"all of them (`{other}`)")]
    single = [base + sign + name for name in CHOICES]
    together = sorted(lab for lab in set(df["label"]) - set(single)
                      if lab.startswith(base + sign))
    rows += [(lab, lab[len(base + sign):]) for lab in together]
    rows += [(lab, lab[len(base + sign):]) for lab in single]
    first = ("official choice added to `paper`" if direction == "add"
             else "official choice replaced by the paper's")
    heads = [first, "seeds"] + [SUMMARY_COLUMNS[c][0] for c in columns]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for lab, name in rows:
        g = df[df["label"] == lab]
        if not g.empty:
            lines.append(f"| {name} | {len(g)} | "
                         + " | ".join(SUMMARY_COLUMNS[c][1](g) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _machines(rows) -> str:
    """The distinct machines of ``rows``: the GPU of a run trained on one, else its (CPU,
    kernels), e.g. ``AMD EPYC AVX2, AVX2, NVIDIA H100 80GB HBM3`` (the second a CPU row whose
    CPU was not recorded)."""
    def text(value):
        return value if isinstance(value, str) else ""
    gpus = rows["gpu"] if "gpu" in rows else [None] * len(rows)
    names = {text(g) or " ".join(filter(None, (text(c), text(k))))
             for c, k, g in zip(rows["cpu"], rows["kernels"], gpus)}
    return ", ".join(sorted(n for n in names if n))


def _register_oracle() -> None:
    """Register the ``oracle-motif`` selector of ``oracle.py`` beside this file (its runs
    are resolved like any other), once."""
    import importlib

    from grprune.selectors import SELECTORS
    if "oracle-motif" in SELECTORS:
        return
    importlib.import_module("benchmarks.accuracy.prune.oracle")  # registers on import


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("spec")
    sp.add_argument("--direction", choices=("remove", "add"), required=True)
    sp.add_argument("--data", default="good-motif")
    sp.add_argument("--splits", default="basis,size")
    sp.add_argument("--seeds", default="0-3")
    sp.add_argument("--out", type=Path, required=True)
    tp = sub.add_parser("table")
    tp.add_argument("dirs", nargs="+", type=Path)
    tp.add_argument("--out", type=Path, default=None, help="PREFIX of .md and .runs.csv")
    tp.add_argument("--protocol", choices=sorted(PROTOCOLS), default="cpu",
                    help="the protocol rows are labelled against (cpu: motif-cpu-base.yaml; "
                         "full: motif-full.yaml)")
    mp = sub.add_parser("summary", help="one direction on one split, in the README's form")
    mp.add_argument("sources", nargs="+", type=Path,
                    help="run directories and .runs.csv files, as for table")
    mp.add_argument("--split", required=True)
    mp.add_argument("--direction", choices=("remove", "add"), required=True)
    mp.add_argument("--columns", default="valid,test,kept,motif_rocauc,per_seed",
                    help="comma-separated, from: " + ", ".join(SUMMARY_COLUMNS))
    mp.add_argument("--protocol", choices=sorted(PROTOCOLS), default="cpu")
    args = ap.parse_args()
    if args.cmd == "spec":
        write_spec(args.direction, args.data, args.splits.split(","), args.seeds, args.out)
    elif args.cmd == "summary":
        try:
            print(summary(args.sources, args.split, args.direction, args.columns.split(","),
                          args.protocol), end="")
        except ValueError as e:
            print(f"ablation.py: {e}", file=sys.stderr)
            sys.exit(2)
    else:
        table(args.dirs, args.out, args.protocol)


if __name__ == "__main__":
    main()
