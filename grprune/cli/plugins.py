"""``grprune --plugin MODULE``: import the user's own parts before a command runs.

A plugin is a Python module that registers parts when imported (``@REGULARIZERS.register
("edge-entropy")``, likewise selectors, encoders and datasets): a module name
(``my_regs``, found on the Python path or in the current directory) or the path of a
``.py`` file. Plugins come from repeated ``--plugin`` options and from the environment
variable ``GRPRUNE_PLUGINS`` (comma-separated); both are loaded. A sweep passes the
list on to its child runs in ``GRPRUNE_PLUGINS`` (paths made absolute), so every child
imports the same modules.

Unlike entry-point plugins, which are skipped with a warning when they fail, a plugin
the user names is required: one that cannot be imported is a
:class:`~grprune.errors.GrpruneError` (one line, exit code 2).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Iterable

import click

from grprune.errors import GrpruneError, did_you_mean

#: environment variable with the plugins of a command and of a sweep's child runs
ENV = "GRPRUNE_PLUGINS"


def from_env(environ: dict | None = None) -> list[str]:
    """The plugins named in ``GRPRUNE_PLUGINS`` (comma-separated), in order."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    return [part.strip() for part in text.split(",") if part.strip()]


def _is_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def _canonical(spec: str) -> str:
    """A module name as it is; a file path made absolute (children may run elsewhere)."""
    return str(Path(spec).expanduser().absolute()) if _is_path(spec) else spec


def _candidates() -> list[str]:
    """Module names a misspelt plugin may have meant: ``*.py`` here and top-level modules."""
    import pkgutil
    here = [p.stem for p in Path.cwd().glob("*.py")]
    return here + sorted({m.name for m in pkgutil.iter_modules()})


def _import_file(path: str) -> None:
    file = Path(path)
    if not file.is_file():
        raise GrpruneError(f"--plugin {path}: no such file")
    name = file.stem
    loaded = sys.modules.get(name)
    loaded_file = getattr(loaded, "__file__", None)  # None: not loaded, or no file (builtin)
    if loaded_file and Path(loaded_file).resolve() == file.resolve():
        return  # imported already, e.g. by module name
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise GrpruneError(f"--plugin {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise


def _import_module(name: str) -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        # `python -m grprune` looks in the current directory; the `grprune` script does not
        sys.path.append(cwd)
    importlib.invalidate_caches()
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise GrpruneError(
                f"--plugin {name}: no module named {exc.name!r} in the current directory or "
                f"on the Python path.{did_you_mean(name, _candidates(), cutoff=0.75)}"
            ) from None
        raise


def load(specs: Iterable[str]) -> list[str]:
    """Import each plugin once, in order; the list to hand to child runs.

    Parameters
    ----------
    specs : iterable of str
        Module names (``my_regs``, ``mypkg.parts``) or paths of ``.py`` files.

    Returns
    -------
    list of str
        The plugins without repeats, file paths made absolute (for ``GRPRUNE_PLUGINS``).

    Raises
    ------
    GrpruneError
        If a plugin is not found or fails to import (the message names it and the
        error, on one line).
    """
    done: list[str] = []
    for spec in specs:
        spec = _canonical(spec)
        if spec in done:
            continue
        try:
            _import_file(spec) if _is_path(spec) else _import_module(spec)
        except GrpruneError as exc:
            raise GrpruneError(str(exc) if str(exc).startswith("--plugin ")
                               else f"--plugin {spec}: {exc}") from None
        except Exception as exc:
            text = " ".join(str(exc).split())
            raise GrpruneError(f"--plugin {spec} failed to import: {type(exc).__name__}: "
                               f"{text}") from None
        done.append(spec)
    return done


def loaded_plugins(ctx: click.Context | None = None) -> list[str]:
    """The plugins this command imported (``--plugin`` and ``$GRPRUNE_PLUGINS``), for
    child processes; from the environment when the command runs outside ``main``."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is not None and ENV in ctx.meta:
        return list(ctx.meta[ENV])
    return [_canonical(p) for p in from_env()]


def child_env(plugins: Iterable[str]) -> dict[str, str]:
    """``{"GRPRUNE_PLUGINS": ...}`` for a child run, or nothing when there are none."""
    plugins = list(plugins)
    return {ENV: ",".join(plugins)} if plugins else {}
