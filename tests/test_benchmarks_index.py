"""``benchmarks/README.md`` indexes every committed result of ``benchmarks/`` (issue 66).

A result file is a file under ``benchmarks/`` whose suffix is ``.md``, ``.csv``, ``.json``,
``.jsonl``, ``.png`` or ``.svg``, except the study notes (every ``README.md``). Specs
(``.yaml``), scripts (``.py``, ``.sh``) and the notes are not results. The index lists a
result by its path relative to ``benchmarks/`` (``accuracy/table1.md``), and every path the
index names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
INDEX = BENCHMARKS / "README.md"
#: the suffixes of result files: tables, run tables, records, figures
RESULT_SUFFIXES = {".md", ".csv", ".json", ".jsonl", ".png", ".svg"}


def result_files() -> list[str]:
    """Every result file under ``benchmarks/``, relative to it, sorted."""
    return sorted(p.relative_to(BENCHMARKS).as_posix() for p in BENCHMARKS.rglob("*")
                  if p.is_file() and p.suffix in RESULT_SUFFIXES and p.name != "README.md"
                  and "__pycache__" not in p.parts)


def test_every_result_file_is_in_the_index():
    text = INDEX.read_text(encoding="utf-8")
    listed = set(re.findall(r"`([\w./-]+)`", text))
    missing = [f for f in result_files() if f not in listed]
    assert result_files(), "no result files found under benchmarks/"
    assert not missing, f"benchmarks/README.md does not list these result files: {missing}"


def test_every_file_the_index_lists_exists():
    text = INDEX.read_text(encoding="utf-8")
    named = {m for m in re.findall(r"`([\w./-]+\.(?:md|csv|json|jsonl|png|svg|yaml))`", text)
             if "/" in m}
    absent = sorted(m for m in named
                    if not (BENCHMARKS / m).is_file() and not (ROOT / m).is_file())
    assert not absent, f"benchmarks/README.md lists files that do not exist: {absent}"


def test_no_result_file_names_a_commit():
    """Commits live in a table's header, columns or records, not in its file name."""
    hashed = [f for f in result_files() if re.search(r"-[0-9a-f]{7}\b", Path(f).name)]
    assert not hashed, f"result files with a commit in their name: {hashed}"


def test_run_tables_keep_their_commits_as_text():
    """A commit of digits and one ``e`` (``02332e6``) reads as text, not as 2.332e9."""
    import pandas as pd

    from benchmarks.accuracy.mdtable import TEXT_COLUMNS
    for path in sorted(BENCHMARKS.rglob("*.runs.csv")):
        df = pd.read_csv(path, dtype=TEXT_COLUMNS)
        if "commit" in df.columns:
            commits = [c for c in df["commit"].dropna().unique()]
            assert all(re.fullmatch(r"[0-9a-f]{7,40}([+,; ].*)?", c) for c in commits), \
                (path, commits)
