"""mkdocs hook: keep the CLI reference's preformatted help text preformatted.

Click help texts hold blocks that must not be rewrapped (``\\b`` in a docstring): the
"Examples:" lines and tables such as ``explain``'s list of files. mkdocs-click hands them to
Markdown as plain paragraphs, so they collapse into running text, and a name such as
``graph-<i>.png`` in them becomes a real ``<i>`` tag that turns the rest of the page to
italics. On the CLI page, a paragraph whose lines after the first are indented is turned
back into a code block (its text escaped); a heading line ending in ``:`` (``Examples:``)
stays a paragraph above it.
"""

from __future__ import annotations

import html
import re
import textwrap

_PARA = re.compile(r"<p>((?:(?!</p>).)*\n  (?:(?!</p>).)*)</p>", re.S)


def _block(match: re.Match) -> str:
    text = match.group(1)
    first, _, rest = text.partition("\n")
    if first.rstrip().endswith(":") and not first.startswith(" ") and len(first) < 40:
        return (f"<p>{first.strip()}</p>\n<pre><code>"
                f"{html.escape(textwrap.dedent(rest).strip(chr(10)))}</code></pre>")
    return f"<pre><code>{html.escape(textwrap.dedent('  ' + text).strip(chr(10)))}</code></pre>"


def on_page_content(html_text: str, page, **kwargs) -> str:
    """Turn the CLI page's indented paragraphs into code blocks."""
    if not page.file.src_uri.endswith("reference/cli.md"):
        return html_text
    return _PARA.sub(_block, html_text)
