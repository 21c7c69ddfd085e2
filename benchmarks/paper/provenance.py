"""Where a table's numbers came from: the commits, hardware and protocol of the runs under
one or more sweep folders, as Markdown lines to commit beside the table ``grprune collect``
wrote (collect states the protocol but not the commit or the machine).

Read from each finished run's ``summary.json`` (``environment``: commit, CPU or GPU, torch,
dgl; ``determinism``: threads, CPU kernels) and its configuration
(:func:`grprune.collect.protocol.trained_with`); nothing is trained.

    python -m benchmarks.paper.provenance runs/paper-ablation --out benchmarks/paper/ablation/ablation-cpu.provenance.md
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence


def hardware(summary) -> str:
    """One run's machine: the GPU's name, or ``AMD EPYC, 2 cores, 1 thread, AVX2 kernels``."""
    env, det = dict(summary.environment or {}), dict(summary.determinism or {})
    if env.get("gpu"):
        return f"{env['gpu']} (GPU)"
    text = f"{env.get('cpu') or 'unknown CPU'}, {env.get('cpu_count', '?')} cores"
    if det.get("threads"):
        text += f", {det['threads']} thread{'s' if det['threads'] != 1 else ''} a run"
    if det.get("cpu_capability"):
        text += f", {det['cpu_capability']} kernels"
    return text + " (CPU)"


def _counted(counter: Counter) -> str:
    return "; ".join(f"{key} ({n} run{'s' if n != 1 else ''})"
                     for key, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def provenance_lines(runs: Sequence) -> list[str]:
    """Markdown bullet lines: commits, hardware, software and protocol of ``runs``.

    Parameters
    ----------
    runs : sequence of grprune.collect.reading.Run
        Finished runs (:func:`grprune.collect.scan_runs`).

    Returns
    -------
    list of str
        One ``- ...`` line each for the runs, the commits, the hardware, the software and
        the protocol.
    """
    from grprune.collect.protocol import trained_with

    envs = [dict(r.summary.environment or {}) for r in runs]
    commits = Counter(str(e.get("commit") or "unknown") for e in envs)
    machines = Counter(hardware(r.summary) for r in runs)
    software = Counter(f"torch {e.get('torch', '?')}, dgl {e.get('dgl', '?')}, "
                       f"python {e.get('python', '?')}" for e in envs)
    datasets = Counter(f"{r.dataset}/{r.split}"
                       + (f"/{r.shift}" if r.shift not in (None, "covariate") else "")
                       for r in runs)
    return [f"- runs: {len(runs)} finished ({_counted(datasets)})",
            f"- commit: {_counted(commits)}",
            f"- hardware: {_counted(machines)}",
            f"- software: {_counted(software)}",
            f"- protocol: {trained_with(runs) or 'each dataset preset schedule, every graph'}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                    help="run directories or sweep folders (searched recursively)")
    ap.add_argument("--out", type=Path, default=None,
                    help="Markdown file to write [default: print only]")
    args = ap.parse_args(argv)
    from grprune.collect import scan_runs
    from grprune.errors import GrpruneError

    try:
        scan = scan_runs(args.dirs)
    except GrpruneError as exc:
        print(f"provenance: {exc}", file=sys.stderr)
        return 2
    if not scan.runs:
        print(f"provenance: no finished runs under {', '.join(map(str, args.dirs))}",
              file=sys.stderr)
        return 1
    text = (f"Runs under {', '.join(f'`{d}`' for d in args.dirs)}:\n\n"
            + "\n".join(provenance_lines(scan.runs)) + "\n")
    if scan.problems:
        kinds = Counter(problem.kind for problem in scan.problems)
        text += f"- not collected: {_counted(kinds)}\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
