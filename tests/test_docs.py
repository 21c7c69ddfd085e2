"""Docs that stay true: the README stays short and keeps its quick start, every relative
link in README.md and docs/ reaches a file, the README's example runs, and the mkdocs
site builds without a warning."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grprune.resolve import resolve_config
from grprune.encoders import ENCODERS
from grprune.errors import GrpruneError
from grprune.model import GraphClassifier
from grprune.regularizers import REGULARIZERS, StepContext
from grprune.selectors import SELECTORS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
QUICK_START = (
    "bash scripts/setup.sh && .venv/bin/grprune run --selector gumbel-gin "
    "--reg size,eps-align --data ogbg-molbbbp",
    ".venv/bin/python -m pytest",
)
#: a Markdown link or image: [text](target "title")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are code."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def test_readme_is_at_most_8_kib():
    size = len(README.read_bytes())
    assert size <= 8192, f"README.md is {size} bytes: move text to docs/, keep it <= 8192"


def test_quick_start_commands_are_verbatim():
    for page in (README, ROOT / "docs" / "index.md"):
        text = page.read_text(encoding="utf-8")
        for command in QUICK_START:
            assert f"\n{command}\n" in text, f"{page.name}: quick start lost {command!r}"


def test_relative_links_reach_files():
    broken = []
    for page in _pages():
        for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # http:, mailto:, an anchor on the same page
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def test_readme_regularizer_example_runs(toy_batch):
    readme = README.read_text(encoding="utf-8")
    match = re.search(r"```python\n(# keep_less.py\n.*?)```", readme, re.S)
    assert match, "README.md: the keep_less.py example is gone"
    code = match.group(1)
    exec(compile(code, "README.md", "exec"), {})
    try:
        cfg = resolve_config(reg="size,eps-align,keep-less", overrides=["reg.keep-less.weight=0.1"])
        assert cfg["reg"]["keep-less"]["weight"] == 0.1
        with pytest.raises(GrpruneError, match="it needs a subgraph selector"):
            resolve_config(reg="keep-less", selector="none")
        torch.manual_seed(0)
        model = GraphClassifier(ENCODERS.make("gin", layers=2, hidden=16), 2,
                                SELECTORS.make("gumbel-gin", hidden=16)).train()
        ctx = StepContext(batch=toy_batch, output=model(toy_batch), model=model)
        value = REGULARIZERS.make("keep-less").loss(ctx)
        assert value.dim() == 0 and 0 < value.item() < 1
        value.backward()
        assert model.selector is not None
        assert any(p.grad is not None for p in model.selector.parameters())
    finally:
        REGULARIZERS.unregister("keep-less")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The mkdocs site, built once with ``--strict`` (any warning fails the build)."""
    for module in ("mkdocs", "material", "pymdownx", "mkdocstrings",
                   "mkdocstrings_handlers.python", "mkdocs_click"):
        pytest.importorskip(module, reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("docs") / "site"
    # NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, not a build warning
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _text(html_text: str) -> str:
    """The text of an HTML fragment: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


def test_mkdocs_build_is_strict_clean(site):
    # the CLI reference: every "Examples:" block a code block, no tag from help text
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    heads = re.findall(r"Examples?:", page)
    blocks = re.findall(r"<p>Examples?:</p>\s*<pre><code>grprune ", page)
    assert len(heads) >= 8 and len(blocks) == len(heads)
    assert "graph-&lt;i&gt;.png" in page and "graph-<i>" not in page
    for tag in ("i", "em", "strong", "code", "pre", "p", "ul", "li", "table"):
        assert len(re.findall(rf"<{tag}[ >]", page)) == page.count(f"</{tag}>"), tag
    # docstring examples are code, without doctest flags, on the API pages
    for name in ("python-api", "reference/parts"):
        page = (site / name / "index.html").read_text(encoding="utf-8")
        assert "<blockquote>" not in page and "doctest: +SKIP" not in page, name
        assert '<pre><code class="language-pycon">&gt;&gt;&gt; ' in page, name


def test_site_is_material_and_nothing_clips(site):
    """mkdocs-material's layout, where a wide code block or table scrolls sideways
    (``overflow: auto`` on ``pre > code`` and on ``table``), not readthedocs' fixed column
    that clipped the quick start and the "What is where" table at 1280 px."""
    index = (site / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<meta name="generator" content="[^"]*mkdocs-material-', index)
    for clipping in ("wy-nav-content", "rst-content", "wy-table-responsive"):
        assert clipping not in index, clipping
    start = index.index('<div class="md-content"')
    article = index[start:index.index("</article>", start)]
    assert 'class="md-content__inner md-typeset"' in article
    codes = [_text(c) for c in re.findall(r"<pre[^>]*>(.*?)</pre>", article, re.S)]
    assert any(QUICK_START[0] in c for c in codes), "the quick start is not a code block"
    where = article[article.index('id="what-is-where"'):]
    assert re.match(r'id="what-is-where">.*?</h2>\s*<table>', where, re.S), where[:300]
    assert "Reproducing the paper" in _text(where[:where.index("</table>")])
    # the CLI reference keeps the material layout too
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert 'class="md-content__inner md-typeset"' in cli
