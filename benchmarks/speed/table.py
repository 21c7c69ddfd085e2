"""Markdown tables from bench.py records, with ratios to ERM and the paper's numbers.

Usage: python -m benchmarks.speed.table FILE.jsonl [FILE.jsonl ...]
"""
import json
import sys

#: paper (Appendix, runtime and memory): PrunE and ERM total training time (s), memory (MB)
PAPER = {"ogbg-molbbbp": {"time": (133.35, 92.42), "mem": (61.07, 32.43)},
         "good-motif": {"time": (501.62, 494.34), "mem": (74.15, 40.62)}}
NAMES = {"erm": "ERM", "prune": "PrunE", "gsat": "GSAT", "ciga": "CIGA"}

for path in sys.argv[1:]:
    recs = [json.loads(line) for line in open(path) if line.strip()]
    if not recs:
        continue
    r0 = recs[0]
    print(f"\n`{path}`: {r0['device_name']}, torch {r0['torch']}, {r0['threads']} CPU thread(s), "
          f"{r0['epochs']} timed epochs per method\n")
    print("| dataset | method | train graphs | train s/epoch (median) | × ERM | graphs/s "
          "| eval s (valid+test) | collate s/epoch | collate+copy s/epoch | peak memory MiB "
          "| × ERM | paper time × ERM | paper memory × ERM |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    erm = {r["dataset"]: r for r in recs if r["method"] == "erm"}
    for r in recs:
        e = erm.get(r["dataset"])
        paper = PAPER.get(r["dataset"]) if r["method"] == "prune" else None
        pt = f"{paper['time'][0] / paper['time'][1]:.2f}" if paper else ""
        pm = f"{paper['mem'][0] / paper['mem'][1]:.2f}" if paper else ""
        print(f"| {r['dataset']} | {NAMES.get(r['method'], r['method'])} | {r['train_graphs']} "
              f"| {r['train_epoch_s']:.3f} | {r['train_epoch_s'] / e['train_epoch_s']:.2f} "
              f"| {r['graphs_per_s']:.0f} | {r['eval_s']:.3f} | {r['collate_s']:.3f} "
              f"| {r['copy_s']:.3f} | {r['peak_mem_mib']:.1f} "
              f"| {r['peak_mem_mib'] / e['peak_mem_mib']:.2f} | {pt} | {pm} |")
    print(f"\npeak memory: {r0['peak_mem_kind']}")
