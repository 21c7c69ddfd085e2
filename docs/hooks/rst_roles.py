"""mkdocs hook: render the Sphinx roles of grprune's numpydoc docstrings as code.

mkdocstrings passes ``:func:`train``` through as the text ``:func:`` followed by the code
``train``. This hook drops the role and, as Sphinx does, shortens ``~a.b.C`` to ``C``.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:func|class|meth|attr|mod|exc|data|obj|math):<code>(~?)([^<]*)</code>")


def _code(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **kwargs) -> str:
    """Replace each ``:role:<code>target</code>`` in a page's HTML by the code alone."""
    return _ROLE.sub(_code, html)
