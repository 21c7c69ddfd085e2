"""One row per method from the summary.json files under a root (benchmarks/zoo/run.sh).

Usage: python -m benchmarks.zoo.table runs/zoo-molbbbp [ERM_DIR_NAME]
Prints test/valid metric, kept edges and median epoch time relative to ERM's.
"""
import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
base = sys.argv[2] if len(sys.argv) > 2 else "erm"
runs = {p.parent.name: json.loads(p.read_text()) for p in sorted(root.glob("*/summary.json"))}
erm_epoch = runs.get(base, {}).get("epoch_time_s_median")
print("| method | best epoch | valid | test | kept (test) | motif edge ROC-AUC | epoch s | × ERM |")
print("|---|---|---|---|---|---|---|---|")
for name, s in runs.items():
    pct = lambda v: "–" if v is None else f"{100 * v:.2f}"  # noqa: E731
    ep = s.get("epoch_time_s_median")
    rel = f"{ep / erm_epoch:.2f}" if ep and erm_epoch else "–"
    motif = s.get("motif_edge_rocauc")
    print(f"| {name} | {s['best_epoch'] + 1} | {pct(s['valid'])} | {pct(s['test'])} | "
          f"{s['kept_edge_fraction']:.3f} | {'–' if motif is None else f'{motif:.3f}'} | "
          f"{ep:.2f} | {rel} |")
