"""Mean +- std over seeds of the summary.json files under a root: one row per variant.

Usage: python -m benchmarks.accuracy.table runs/bench-molbbbp
"""
import json
import statistics
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/bench-molbbbp")
print("| variant | seeds | valid (mean ± std) | test (mean ± std) | kept (test) | wall s/run |")
print("|---|---|---|---|---|---|")
for variant in sorted(p for p in root.iterdir() if p.is_dir()):
    sums = [json.loads(s.read_text()) for s in sorted(variant.glob("*/summary.json"))]
    if not sums:
        continue
    def ms(key, scale=100.0):
        vals = [s[key] * scale for s in sums if s.get(key) is not None]
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        return f"{statistics.mean(vals):.2f} ± {sd:.2f}"
    kept = statistics.mean(s["kept_edge_fraction"] for s in sums)
    wall = statistics.mean(s["wall_time_s"] for s in sums)
    print(f"| {variant.name} | {len(sums)} | {ms('valid')} | {ms('test')} | {kept:.3f} | {wall:.0f} |")
