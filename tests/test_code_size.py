"""House-style size limits (STYLE.md, "Things to grow out of"): no function in
``grprune/`` longer than 80 lines and no module longer than 600, docstrings included.

A function's length is ``end_lineno - lineno + 1`` of its ``def`` node (decorators
not counted, nested functions counted in their parent and on their own); a module's
is its number of lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "grprune"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


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
