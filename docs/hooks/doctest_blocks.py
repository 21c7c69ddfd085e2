"""mkdocs hook: render the ``>>>`` examples of docstrings as code, without doctest flags.

Outside a numpydoc ``Examples`` section (a module's text, an ``Example`` admonition),
mkdocstrings hands ``>>>`` lines to Markdown, which reads each ``>`` as a quote: the
example becomes three nested block quotes around one paragraph of prose. This hook turns
such a paragraph back into a ``pycon`` code block: lines that Markdown left starting with
``...`` are continuations, lines that read as a value (``(True, True)``, ``['a']``,
``{...}``, a number, a string, ``True``/``False``/``None``) are output, the rest are input
and get their ``>>>`` back; ``# doctest: +SKIP`` and other doctest flags are dropped.
"""

from __future__ import annotations

import re

_QUOTED = re.compile(r"<blockquote>\s*<blockquote>\s*<blockquote>\s*<p>(.*?)</p>\s*"
                     r"</blockquote>\s*</blockquote>\s*</blockquote>", re.S)
_FLAG = re.compile(r"\s*# doctest: [+-][A-Z_]+(?:, *[+-][A-Z_]+)*")
_OUTPUT = re.compile(r"""^(?:[(\[{'"0-9<-]|True\b|False\b|None\b)""")


def _code(match: re.Match) -> str:
    lines = []
    for line in match.group(1).split("\n"):
        line = _FLAG.sub("", line.rstrip())
        if line.startswith("..."):
            lines.append(line)
        elif _OUTPUT.match(line.lstrip()):
            lines.append(line.strip())
        else:
            lines.append("&gt;&gt;&gt; " + line.strip())
    return '<pre><code class="language-pycon">' + "\n".join(lines) + "</code></pre>"


def on_page_content(html_text: str, **kwargs) -> str:
    """Turn every triple block quote of one paragraph into a ``>>>`` code block."""
    return _QUOTED.sub(_code, html_text)
