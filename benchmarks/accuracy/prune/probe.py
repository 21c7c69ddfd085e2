"""What a trained PrunE classifier reads: its accuracy under ground-truth edge masks.

On data with ground-truth motif edges (GOOD-Motif, SPMotif), a run's model is evaluated
on one split part with the classifier fed different masks instead of the selector's:

* ``selector``: the selector's own evaluation mask (as the trainer evaluates);
* ``all edges``: every edge kept (the selector off);
* ``motif only``: only the motif's edges :math:`G_c` kept;
* ``no motif``: every edge but the motif's;
* ``selector + motif``: the selector's mask with every motif edge put back;
* ``selector - motif``: the selector's mask with every motif edge dropped.

It also reports the share of motif and of other edges that the selector's mask keeps,
over all graphs and per class (``kept_motif_by_class``): a selector that keeps a
different share of the motif for each class writes the class into its mask.
If ``no motif`` or ``selector - motif`` scores as well as ``selector`` on the training
domains, the classifier does not need the motif there: it reads the class from
something else (for example from which edges the selector dropped).

The model is the run's selected checkpoint (``--checkpoint best``, ``checkpoint.pt``; the
run may still be training), its last epoch's (``last``: ``checkpoint-last.pt``, written
with ``-H train.save_last=true``) or, for a run still training, the model of its latest
epoch (``state``: ``state.pt``). A selected ERM warm-up epoch has an untrained selector,
so its ``selector`` rows say nothing.

    python -m benchmarks.accuracy.prune.probe RUN_DIR [RUN_DIR ...] --parts id-valid,valid,test

Prints one table per run (accuracy ×100) and, with ``--json FILE``, writes the numbers.
With several runs (of one setting, e.g. the seeds of one split) it also prints their
mean ± sample std; ``--from-json FILE`` prints that for runs probed before::

    python -m benchmarks.accuracy.prune.probe --from-json probe.json --split size
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from grprune.record import files as R
from grprune.data.store import GraphStore
from grprune.run import load_config_dataset
from grprune.record.runconfig import RunConfig
from grprune.build import build_model_from_features

MASKS = ("selector", "all edges", "motif only", "no motif", "selector + motif",
         "selector - motif")
BATCH = 256
#: --checkpoint choice -> (file, key of the model's state dict in it or None)
CHECKPOINTS = {"best": (R.CHECKPOINT, None), "last": (R.LAST_CHECKPOINT, None),
               "state": (R.STATE, "model")}


def _masks(sel_weight: torch.Tensor, gt: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every mask of :data:`MASKS` for one batch; all of shape (E,), values in {0, 1}
    except the selector's own (which follows its ``eval_mode``)."""
    motif = (gt > 0).float()
    ones = torch.ones_like(motif)
    return {"selector": sel_weight, "all edges": ones, "motif only": motif,
            "no motif": ones - motif, "selector + motif": torch.maximum(sel_weight, motif),
            "selector - motif": sel_weight * (ones - motif)}


def load_model(run_dir: Path, cfg: RunConfig, checkpoint: str = "best"):
    """The run's model from the file :data:`CHECKPOINTS` names, in eval mode, on the CPU."""
    name, key = CHECKPOINTS[checkpoint]
    state = torch.load(run_dir / name, map_location="cpu", weights_only=True)
    assert cfg.features is not None, f"{run_dir}: config.json has no features record"
    model, _ = build_model_from_features(cfg, cfg.features)
    model.load_state_dict(state[key] if key else state)
    return model.eval()


@torch.no_grad()
def probe(run_dir: Path, parts: list[str], checkpoint: str = "best", seed: int = 0) -> dict:
    """Accuracy under each mask and the selector's keep rates, per part.

    Returns
    -------
    dict
        ``part -> {"accuracy": {mask: float}, "kept_motif": float, "kept_other": float,
        "kept_motif_by_class": {class: float}, "graphs": int, "split": str}``, where
        ``split`` is the run's ``data.split`` (what ``--from-json --split`` selects by).
    """
    cfg = RunConfig.from_dict(json.loads((run_dir / R.CONFIG).read_text()))
    model = load_model(run_dir, cfg, checkpoint)
    dataset = load_config_dataset(cfg)
    store = GraphStore.from_dataset(dataset)
    limit = int(cfg.data.limit or 0)
    torch.manual_seed(seed)
    out = {}
    for part in parts:
        idx = np.asarray(dataset.splits[part], dtype=np.int64)
        idx = idx[:limit] if limit else idx
        correct = {m: 0 for m in MASKS}
        kept = {"motif": [0.0, 0], "other": [0.0, 0]}
        by_class: dict[int, list] = {}
        for start in range(0, len(idx), BATCH):
            batch = store.batch(idx[start:start + BATCH])
            y = batch.y.view(-1)
            sel = model.selector(batch)
            gt = batch.edge_gt
            for name, mask in _masks(sel.edge_weight, gt).items():
                pred = model.encode(batch, mask).logits.argmax(-1)
                correct[name] += int((pred == y).sum())
            for key, where in (("motif", gt > 0), ("other", gt == 0)):
                kept[key][0] += float(sel.edge_weight[where].sum())
                kept[key][1] += int(where.sum())
            edge_y = y[batch.edge_graph]
            for c in torch.unique(y).tolist():
                where = (gt > 0) & (edge_y == c)
                acc = by_class.setdefault(int(c), [0.0, 0])
                acc[0] += float(sel.edge_weight[where].sum())
                acc[1] += int(where.sum())
        out[part] = {"graphs": int(len(idx)), "split": cfg.data.split,
                     "accuracy": {m: correct[m] / len(idx) for m in MASKS},
                     "kept_motif": kept["motif"][0] / max(kept["motif"][1], 1),
                     "kept_other": kept["other"][0] / max(kept["other"][1], 1),
                     "kept_motif_by_class": {str(c): v[0] / max(v[1], 1)
                                             for c, v in sorted(by_class.items())}}
    return out


def table(run_dir: Path, result: dict) -> str:
    """One run's :func:`probe` result as a Markdown table (accuracy ×100, kept shares)."""
    return summary({str(run_dir): result}, title=f"## {run_dir}")


def summary(results: dict[str, dict], title: str | None = None) -> str:
    """Mean ± sample std over runs (the values of ``results``, each one run's
    :func:`probe` result over the same parts) as a Markdown table under ``title``; one
    run gives its values alone."""
    runs = list(results.values())
    parts = list(runs[0])

    def cell(values: list[float], scale: float, digits: int) -> str:
        v = np.asarray([x for x in values if not np.isnan(x)]) * scale
        if len(v) < 2:
            return f"{v.mean():.{digits}f}" if len(v) else "–"
        return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}"

    lines = [title or f"## mean ± std over {len(runs)} runs", "",
             "| mask | " + " | ".join(parts) + " |", "|---|" + "---|" * len(parts)]
    for m in MASKS:
        lines.append(f"| {m} | " + " | ".join(
            cell([r[p]["accuracy"][m] for r in runs], 100, 2) for p in parts) + " |")
    for key in ("kept_motif", "kept_other"):
        label = key.replace("_", " ").replace("kept", "selector keeps,")
        lines.append(f"| {label} edges | " + " | ".join(
            cell([r[p][key] for r in runs], 1, 3) for p in parts) + " |")
    classes = sorted({c for r in runs for p in parts for c in r[p]["kept_motif_by_class"]},
                     key=int)
    for c in classes:
        lines.append(f"| selector keeps, motif edges of class {c} | " + " | ".join(
            cell([r[p]["kept_motif_by_class"].get(c, float("nan")) for r in runs], 1, 3)
            for p in parts) + " |")
    return "\n".join(lines)


def _split_of(result: dict) -> str | None:
    """The ``data.split`` a :func:`probe` result records (None if it records none)."""
    return next(iter(result.values()), {}).get("split")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--parts", default="id-valid,valid,test")
    ap.add_argument("--checkpoint", choices=sorted(CHECKPOINTS), default="best")
    ap.add_argument("--json", type=Path, help="write every run's numbers here")
    ap.add_argument("--from-json", type=Path,
                    help="summarise the runs of a --json file instead of probing")
    ap.add_argument("--split", help="with --from-json: only the runs of this data.split")
    args = ap.parse_args(argv)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        if args.split:
            results = {k: v for k, v in results.items() if _split_of(v) == args.split}
        if not results:
            ap.error(f"no runs in {args.from_json}" + (f" of split {args.split}" if args.split
                                                       else ""))
        print(summary(results))
        return
    if not args.runs:
        ap.error("give run directories, or --from-json FILE")
    torch.set_num_threads(1)
    results = {}
    for run_dir in args.runs:
        result = probe(run_dir, args.parts.split(","), args.checkpoint)
        results[str(run_dir)] = result
        print(table(run_dir, result), end="\n\n")
    if len(results) > 1:
        print(summary(results), end="\n\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
