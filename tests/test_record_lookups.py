"""Run records are read through their types, not string keys (issue 40).

Counts, with ``ast``, the string-key lookups of a run record outside ``grprune/record/``:
``x["KEY"]``, ``x.get("KEY")``, ``x.setdefault("KEY")`` and ``x.pop("KEY")`` with a ``str``
constant, one per chain (``cfg["train"]["epochs"]`` is one), where the chain starts at a
configuration, a summary or an epoch record, recognised by its name: the root's last
identifier (``cfg``, ``self.cfg``, ``plan.cfg``, ``run.summary``, ``rec``) is one of
:data:`ROOTS`. The typed records (:class:`grprune.record.RunConfig` and its sections,
:class:`~grprune.record.RunSummary`, :class:`~grprune.record.EpochRecord`) are read with
attributes instead; a plugin's own hyperparameter by its dotted key
(``cfg.setting("reg.size.eta")``).

The count was 186 before the typed records (commit 2c5017d). :data:`CEILING` holds what is
left, per module: a baseline that only shrinks. Run this file as a script for the list.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "grprune"
#: names that hold a run record (or one of its sections) where the code reads one
ROOTS = {"cfg", "config", "summary", "record", "rec", "last", "best", "tc", "written", "old",
         "dims", "sel"}
#: lookups left per module; every other module has none
CEILING = {
    "grprune/naming.py": 4,             # method_slug(cfg)
    "grprune/explain.py": 1,            # explain.json's "files", not a run record
}


def _lookup_of(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``(base, key)`` when ``node`` is a string-key lookup."""
    if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)):
        return node.value, node.slice.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "setdefault", "pop") and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.func.value, node.args[0].value
    return None


def _root_name(expr: ast.expr) -> str | None:
    while True:
        found = _lookup_of(expr)
        if found is not None:
            expr = found[0]
        elif isinstance(expr, ast.BoolOp):  # (x.get("a") or {}).get("b")
            expr = expr.values[0]
        elif isinstance(expr, ast.Subscript):  # records[-1]["epoch"]
            expr = expr.value
        elif isinstance(expr, ast.Name):
            return expr.id
        elif isinstance(expr, ast.Attribute):
            return expr.attr
        else:
            return None


def lookups() -> list[tuple[str, int, str]]:
    """``(module path, line, source)`` of every record lookup chain outside record/."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("grprune/record/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inner = set()
        for node in ast.walk(tree):
            found = _lookup_of(node)
            if found is not None:
                base = found[0]
                while isinstance(base, ast.BoolOp):
                    base = base.values[0]
                if _lookup_of(base) is not None:
                    inner.add(id(base))
        for node in ast.walk(tree):
            if isinstance(node, ast.expr) and _lookup_of(node) is not None \
                    and id(node) not in inner and _root_name(node) in ROOTS:
                out.append((rel, node.lineno, ast.unparse(node)))
    return out


def test_records_are_read_through_their_types():
    per_module = Counter(rel for rel, _, _ in lookups())
    over = {rel: n for rel, n in per_module.items() if n > CEILING.get(rel, 0)}
    assert not over, (
        f"string-key lookups of run records where attributes exist (module: found, allowed): "
        f"{ {rel: (n, CEILING.get(rel, 0)) for rel, n in over.items()} }; read "
        f"cfg.train.epochs, summary.test, record.value(split, metric) instead "
        f"(python {Path(__file__).name} lists them)")
    assert sum(per_module.values()) < 30


if __name__ == "__main__":
    found = lookups()
    for rel, line, text in found:
        print(f"{rel}:{line}: {text}")
    print(f"total {len(found)}", file=sys.stderr)
