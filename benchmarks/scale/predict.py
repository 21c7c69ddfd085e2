"""Scale: ``grprune predict`` over 10^4-10^6 generated SMILES, beside ``chemprop predict``.

Each measurement runs the tool's own command line in a fresh process (imports, model
loading, reading the CSV and writing the predictions all counted), pinned to the same
cores, and reports:

* ``seconds``: wall time of the command, end to end;
* ``molecules_per_s``: input rows / seconds;
* ``cpu_s``: CPU seconds of the process and the workers it waited for (``os.wait4``);
* ``peak_rss_mib``: ``ru_maxrss`` from ``os.wait4``: on Linux the largest resident set of
  the process and the worker processes it waited for.

The rows are :func:`featurize.rows_csv`'s (``chains`` recipe, seed 0: unique molecules from
a seeded BRICS recombination of bundled BACE, BBBP and HIV fragments; made once, cached,
git-ignored, under ``benchmarks/scale/data/``).

``grprune``: ``grprune predict RUN --csv ROWS --out preds.csv --progress plain``, with
RUN a finished ``ogbg-molbbbp`` run. ``chemprop``: chemprop 2.x's ``chemprop predict -i ROWS
--model-paths MODEL.pt -o preds.csv`` from a model trained on the bundled BBBP data, run from
its own virtual environment (``--chemprop``), never the project's.

    python -m benchmarks.scale.predict --run RUN --chemprop-model MODEL.pt \\
        --rows 10000,100000 --tools grprune,chemprop --out benchmarks/scale/predict-cpu-2core.jsonl
    python -m benchmarks.scale.predict --table benchmarks/scale/predict-cpu-2core.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def hardware() -> dict:
    """CPU model, cores this process may use, memory (GiB), Python."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": model, "cores": len(os.sched_getaffinity(0)), "memory_gib": round(mem, 1),
            "python": platform.python_version()}


def commit() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes)."""
    try:
        sha = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                      text=True).strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return ""


def measure(cmd: list[str], timeout: float, log: Path) -> dict:
    """Run ``cmd``; wall seconds, CPU seconds and peak RSS (MiB) of it and its workers."""
    t = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONWARNINGS": "ignore"})
        deadline = t + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
    seconds = time.perf_counter() - t
    return {"seconds": round(seconds, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "exit": os.waitstatus_to_exitcode(status)}


#: distinct molecules made; larger inputs repeat them (``--distinct``)
DISTINCT = 100_000


def input_csv(rows: int, distinct: int) -> tuple[Path, int]:
    """The rows and how many of them are distinct: :func:`featurize.rows_csv` up to
    ``distinct`` rows, beyond that its ``distinct`` molecules repeated in order
    (``brics-chains-<distinct>-seed0-x<k>.csv``). Predict keeps nothing between rows (each
    row is parsed, featurized and scored), so a repeat costs what a new molecule costs."""
    from benchmarks.scale.featurize import rows_csv
    if rows <= distinct:
        return rows_csv(rows, recipe="chains"), rows
    base = rows_csv(distinct, recipe="chains")
    k = -(-rows // distinct)
    path = base.with_name(f"{base.stem}-x{k}.csv")
    if not path.is_file():
        header, *body = base.read_text().splitlines(keepends=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w") as fh:
            fh.write(header)
            for _ in range(k):
                fh.writelines(body)
        os.replace(tmp, path)
    return path, distinct


def run_one(tool: str, rows: int, args, work: Path) -> dict:
    csv, distinct = input_csv(rows, args.distinct)
    out = work / f"{tool}-{rows}.csv"
    if tool == "grprune":
        cmd = [sys.executable, "-m", "grprune", "predict", str(args.run), "--csv", str(csv),
               "--out", str(out), "--progress", "plain", "--device", "cpu"]
    else:
        cmd = [str(args.chemprop), "predict", "-i", str(csv), "--model-paths",
               str(args.chemprop_model), "-o", str(out), "--num-workers", "0",
               "--accelerator", "cpu"]
    log = work / f"{tool}-{rows}.log"
    rec = {"tool": tool, "rows": rows, "distinct": distinct, "input": csv.name,
           **measure(cmd, args.timeout, log)}
    rec["molecules_per_s"] = round(rows / rec["seconds"], 1)
    if out.is_file():
        with out.open() as fh:
            rec["output_rows"] = sum(1 for _ in fh) - 1
    rec["log_tail"] = log.read_text(errors="replace").splitlines()[-3:]
    return rec


def table(paths: list[Path]) -> str:
    """A Markdown table of the records in ``paths``."""
    recs = [json.loads(line) for p in paths for line in p.read_text().splitlines() if line]
    head = ("| rows | distinct | tool | seconds | molecules/s | CPU s | peak RSS MiB | output rows "
            "| commit |\n|---:|---:|---|---:|---:|---:|---:|---:|---|")
    lines = [head]
    for r in sorted(recs, key=lambda r: (r["rows"], r["tool"])):
        lines.append(f"| {r['rows']:,} | {r.get('distinct', r['rows']):,} | {r['tool']} | "
                     f"{r['seconds']:.1f} | "
                     f"{r['molecules_per_s']:,.0f} | {r['cpu_s']:.0f} | "
                     f"{r['peak_rss_mib']:,.0f} | {r.get('output_rows', 0):,} | "
                     f"`{r.get('commit', '')}` |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="10000,100000")
    ap.add_argument("--tools", default="grprune,chemprop")
    ap.add_argument("--run", type=Path, help="a finished ogbg-molbbbp run directory")
    ap.add_argument("--chemprop", type=Path, default=Path("/work/chemprop-venv/bin/chemprop"))
    ap.add_argument("--chemprop-model", type=Path)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--distinct", type=int, default=DISTINCT,
                    help="distinct molecules made; larger inputs repeat them")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, nargs="*")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    hw, sha = hardware(), commit()
    with tempfile.TemporaryDirectory(prefix="grprune-scale-") as tmp:
        for rows in (int(r) for r in args.rows.split(",")):
            for tool in args.tools.split(","):
                rec = {**run_one(tool, rows, args, Path(tmp)), "commit": sha, "hardware": hw,
                       "date": time.strftime("%Y-%m-%d")}
                print(json.dumps(rec), flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
