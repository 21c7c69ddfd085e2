"""House-style limits (STYLE.md, "Things to grow out of"): no function in ``grprune/``
longer than 80 lines and no module longer than 520, docstrings included (STYLE.md's 600,
lowered so that the cap stops shaping the code: a module near it is split by what it holds);
the training step under 450; few three-argument ``getattr`` fallbacks, each saying why; no
part reading its hyperparameters by string.

A function's length is ``end_lineno - lineno + 1`` of its ``def`` node (decorators
not counted, nested functions counted in their parent and on their own); a module's
is its number of lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "grprune"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 520
#: the training step (Eq. 5) and nothing else
MAX_STEP_LINES = 450
#: ``getattr(obj, name, default)`` calls: each guards what a platform or a library version
#: may lack (``os.O_NOFOLLOW``, a stream's ``isatty``), never an attribute grprune declares
MAX_GETATTR_FALLBACKS = 12


def test_no_long_functions_or_modules():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(PACKAGE.parent)
        n_lines = len(source.splitlines())
        if n_lines > MAX_MODULE_LINES:
            offenders.append(f"{rel}: module has {n_lines} lines (max {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    offenders.append(f"{rel}:{node.lineno}: {node.name} has {length} lines "
                                     f"(max {MAX_FUNCTION_LINES})")
    assert not offenders, "split along the steps they already comment:\n" + "\n".join(offenders)


def test_the_step_stays_small():
    n_lines = len((PACKAGE / "step.py").read_text(encoding="utf-8").splitlines())
    assert n_lines < MAX_STEP_LINES, f"grprune/step.py has {n_lines} lines"


def _getattr_fallbacks() -> list[tuple[Path, int, int]]:
    """(path, first line, last line) of every three-argument ``getattr`` call."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "getattr" and len(node.args) == 3):
                out.append((path, node.lineno, node.end_lineno or node.lineno))
    return out


def test_getattr_fallbacks_are_few_and_each_says_why():
    found = _getattr_fallbacks()
    where = [f"{p.relative_to(PACKAGE.parent)}:{a}" for p, a, _ in found]
    assert len(found) <= MAX_GETATTR_FALLBACKS, (
        f"{len(found)} three-argument getattr calls (max {MAX_GETATTR_FALLBACKS}); declare "
        f"the attribute on its class instead of guessing at it: {', '.join(where)}")
    silent = []
    for (path, first, last), name in zip(found, where):
        lines = path.read_text(encoding="utf-8").splitlines()
        # a comment on the call's lines or on the line above says why it must stay
        if not any("#" in line for line in lines[max(first - 2, 0):last]):
            silent.append(name)
    assert not silent, f"say why each getattr fallback must stay (a comment): {silent}"


def test_no_part_reads_its_hyperparameters_by_string():
    import re
    pattern = re.compile(r"\bhparams\s*(\[|\.get\()")
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{i}"
                 for folder in ("regularizers", "selectors", "encoders")
                 for path in sorted((PACKAGE / folder).rglob("*.py"))
                 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if pattern.search(line)]
    assert not offenders, f"read self.hp.<name> (typed) instead: {offenders}"
