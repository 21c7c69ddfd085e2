"""Per-epoch training time of every method relative to ERM, one run at a time.

Usage: python -m benchmarks.zoo.timing OUT_ROOT [DATASET] [EPOCHS] [extra grprune flags...]
Runs each method for EPOCHS epochs (default 3, no warm-up, no train-split evaluation)
sequentially with one torch thread, and prints the median time of the training pass
per epoch (``train_time_s`` in results.jsonl; evaluation excluded) and its ratio to ERM.
"""
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

out = Path(sys.argv[1])
data = sys.argv[2] if len(sys.argv) > 2 else "ogbg-molbbbp"
epochs = sys.argv[3] if len(sys.argv) > 3 else "3"
extra = sys.argv[4:]
methods = {"erm": ["--reg", "none"], "prune": ["--reg", "size,eps-align"],
           "gsat": ["--reg", "gsat"], "ciga": ["--reg", "ciga"], "irm": ["--reg", "irm"],
           "vrex": ["--reg", "vrex"], "groupdro": ["--reg", "groupdro"],
           "drop-edge": ["--selector", "drop-edge", "--reg", "none"]}
env = {**os.environ, "OMP_NUM_THREADS": "1"}
rows = {}
for name, args in methods.items():
    run_dir = out / name
    subprocess.run(["grprune", "run", "--data", data, "--epochs", epochs, "--progress", "none",
                    "-H", "train.warmup_epochs=0", "-H", "train.eval_train=false",
                    "--out", str(run_dir), *args, *extra],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    recs = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    rows[name] = statistics.median(r["train_time_s"] for r in recs)
print(f"| method | train s/epoch ({data}) | × ERM |")
print("|---|---|---|")
for name, t in rows.items():
    print(f"| {name} | {t:.2f} | {t / rows['erm']:.2f} |")
