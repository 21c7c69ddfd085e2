"""The import graph of ``grprune/``: no cycles, and a record layer at the bottom.

Read with ``ast`` from the source, so imports inside functions count as much as those at
the top of a module: a deferred import that closes a cycle only hides it until someone
hoists it. Every import counts, with no exemptions: a package that imports its own
submodules (``grprune.cli`` adding its commands to the group) closes a cycle as soon as
one of them imports a name from the package, so the submodules import from the module
that defines the name (``grprune.cli.options``, ``grprune.cli.plugins``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "grprune"


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The grprune modules ``name`` imports anywhere in its source (``from a import b``
    counts ``a`` and, when it is a module, ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_import_graph_has_no_cycle():
    bad = cycles(graph())
    assert not bad, "import cycles (function-level imports included):\n" + "\n".join(
        " <-> ".join(c) for c in bad)


def test_the_commands_and_the_api_do_not_import_the_cli_group():
    """``grprune.cli`` is the group: it imports its commands, and nothing imports it back
    (the Python API prints progress through ``grprune.progress``)."""
    g = graph()
    cli = {m for m in g if m.startswith("grprune.cli.")}
    assert {"grprune.cli.run", "grprune.cli.ls", "grprune.cli.options",
            "grprune.cli.plugins"} <= cli
    assert cli - {"grprune.cli.options", "grprune.cli.plugins"} <= g["grprune.cli"]
    users = sorted(m for m, deps in g.items() if "grprune.cli" in deps)
    assert users == ["grprune.__main__"], users
    outside = sorted(m for m, deps in g.items() if not m.startswith("grprune.cli")
                     and m != "grprune.__main__" and deps & (cli | {"grprune.cli"}))
    assert not outside, f"{outside} import the command line"


def test_the_record_layer_imports_only_errors_hparams_and_messages():
    g = graph()
    record = {m for m in g if m == "grprune.record" or m.startswith("grprune.record.")}
    assert {"grprune.record.files", "grprune.record.settings", "grprune.record.runconfig"} <= record
    allowed = record | {"grprune", "grprune.errors", "grprune.hparams", "grprune.messages"}
    for m in sorted(record):
        assert g[m] <= allowed, f"{m} imports {sorted(g[m] - allowed)}"
    # and the modules it may import import nothing of grprune above it
    below = {"grprune", "grprune.errors", "grprune.messages", "grprune.coerce"}
    for m in ("grprune.errors", "grprune.messages", "grprune.coerce", "grprune.hparams"):
        assert g[m] <= below, f"{m} imports {sorted(g[m])}"


def reached(g: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (deferred imports too)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in g[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


def test_training_s_machinery_stays_in_its_own_rooms():
    """Using a finished run (:mod:`grprune.inference`: load_run, predict, explain) reaches
    neither the training loop nor a run's workflow; evaluation shares the CUDA-graph capture
    with the step through :mod:`grprune.capture`, not through :mod:`grprune.step`; and no
    function of the record layer takes a trainer (resuming reads one: :mod:`grprune.resume`)."""
    g = graph()
    training = {"grprune.trainer", "grprune.run", "grprune.step", "grprune.resume"}
    assert not reached(g, "grprune.inference") & training
    assert "grprune.step" not in g["grprune.evaluation"]
    assert {"grprune.capture"} <= g["grprune.evaluation"] & g["grprune.step"]
    takes = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.name}"
             for name, path in modules().items() if name.startswith("grprune.record")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             and any(a.arg == "trainer" for a in node.args.args + node.args.kwonlyargs)]
    assert not takes, takes


#: names a module imports on purpose to hand on: DGL, imported after compat's workaround
FORWARDED = {("grprune.compat", "dgl")}


def _top_level(tree: ast.Module):
    for node in tree.body:
        yield from (ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node])


def defining_module(module: str, name: str, mods: dict[str, Path]) -> str | None:
    """The grprune module that defines ``name`` (a def, class or assignment at its top
    level), following the from-imports of ``module``; None for a submodule."""
    for _ in range(10):
        if f"{module}.{name}" in mods or module not in mods:
            return None
        tree = ast.parse(mods[module].read_text(encoding="utf-8"))
        nodes = list(_top_level(tree))
        for n in nodes:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and n.name == name:
                return module
            targets = (n.targets if isinstance(n, ast.Assign) else
                       [n.target] if isinstance(n, ast.AnnAssign) else [])
            if any(isinstance(x, ast.Name) and x.id == name
                   for t in targets for x in ast.walk(t)):
                return module
        source = [(n.module, a.name) for n in nodes if isinstance(n, ast.ImportFrom)
                  and not n.level and n.module for a in n.names if (a.asname or a.name) == name]
        if not source:
            return module
        module, name = source[0]
    return module


def test_every_import_names_the_module_that_defines_the_name():
    """``from grprune.X import name`` inside ``grprune/`` imports from where ``name`` is
    defined, never through a package or module that imports it from elsewhere (issue 53);
    the packages' re-exports are for users."""
    mods, bad = modules(), []
    for module, path in sorted(mods.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and not node.level and node.module
                    and node.module in mods):
                continue
            for alias in node.names:
                where = defining_module(node.module, alias.name, mods)
                if where not in (None, node.module) and (node.module, alias.name) not in FORWARDED:
                    bad.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: "
                               f"{alias.name} from {node.module}, defined in {where}")
    assert not bad, "\n".join(bad)


def test_the_cycle_finder_finds_a_deferred_import_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "p": {"p.x"}, "p.x": {"p"}, "d": set()}
    # a package and a submodule that imports a name from it are a cycle too
    assert cycles(g) == [["a", "b", "c"], ["p", "p.x"]]
    # a package importing submodules that import each other's modules only is none
    assert cycles({"p": {"p.x", "p.y"}, "p.x": {"p.y"}, "p.y": set()}) == []


def test_resolving_a_dataset_name_imports_its_module_alone_and_no_rdkit_or_ogb(tmp_path):
    """``--data ogbg-molbbbp`` resolves through the lazy name table: only
    ``grprune.data.ogbg`` is imported, and neither RDKit nor OGB."""
    import os
    import subprocess
    import sys
    code = ("import sys\n"
            "from grprune.resolve import resolve_config\n"
            "resolve_config(data='ogbg-molbbbp', selector='gumbel-gin', reg='size,eps-align')\n"
            "mods = ('rdkit', 'ogb', 'grprune.data.ogbg', 'grprune.data.synthetic',\n"
            "        'grprune.data.good_hiv', 'grprune.data.drugood', 'grprune.data.molecule_csv')\n"
            "print(sorted(m for m in mods if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "GRPRUNE_DATA_ROOT": str(tmp_path)},
                         cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['grprune.data.ogbg']"


def test_the_lazy_dataset_table_matches_what_the_modules_register():
    import importlib

    from grprune.data import BUILTIN_DATASETS, DATASETS
    from grprune.registry import normalize
    for name, aliases, module in BUILTIN_DATASETS:
        importlib.import_module(module)
        cls = DATASETS.get(name)
        assert cls.registered_name == name and cls.__module__.startswith(module)
        assert {k for k, v in DATASETS._keys.items() if v == name} == {
            normalize(a) for a in (name, *aliases)}
