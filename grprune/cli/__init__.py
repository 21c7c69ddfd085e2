"""The ``grprune`` command line: ``run``, ``ls``, ``data``, ``sweep``, ``collect``,
``explain``, ``predict`` and ``calibrate``.

Every option has help text and an environment-variable fallback
(``GRPRUNE_<COMMAND>_<OPTION>``, e.g. ``GRPRUNE_RUN_EPOCHS=5``). Errors a user
can cause end with one message on stderr and exit code 2. ``grprune --plugin MODULE
COMMAND`` imports the user's own parts first (:mod:`grprune.cli.plugins`); options that
``run`` and ``sweep`` share are declared once, in :mod:`grprune.cli.options`.

This module is the group (:func:`main`, the ``grprune`` console script) and what it does
around every command: one line and exit code 2 for an error a user can cause, resuming
after Ctrl-C or SIGTERM. Each command is a module of its own (``run``, ``ls``, ``data``,
``sweep``, ``collect``, ``explain``), which imports :mod:`grprune.cli.options` and
:mod:`grprune.cli.plugins` and never this module; the progress line and the summary
table are :mod:`grprune.progress`, shared with the Python API.
"""

from __future__ import annotations

import os
import warnings

import click

from grprune.cli import calibrate, collect, data, explain, ls, run, sweep, tune
from grprune.cli import plugins as _plugins
from grprune.errors import GrpruneError


class GrpruneGroup(click.Group):
    """A click group that turns user errors into one line and exit code 2."""

    def invoke(self, ctx: click.Context):
        restore = _on_sigterm_raise()
        try:
            return super().invoke(ctx)
        except Terminated:
            click.echo("grprune: terminated; run the same command again to resume", err=True)
            ctx.exit(143)
        except GrpruneError as exc:
            click.echo(f"grprune: error: {exc}", err=True)
            ctx.exit(2)
        except OSError as exc:  # a path that cannot be created, read or written; a full disk
            where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f)
            link = str(exc.filename or "")
            if isinstance(exc, FileExistsError) and os.path.islink(link) \
                    and not os.path.exists(link):  # mkdir met a link to nothing
                click.echo(f"grprune: error: {link} is a symbolic link to "
                           f"{os.readlink(link)}, which does not exist; create that folder, "
                           f"remove the link, or choose another path", err=True)
            else:
                click.echo(f"grprune: error: {exc.strerror or exc}"
                           + (f": {where}" if where else ""), err=True)
            ctx.exit(2)
        except UnicodeDecodeError as exc:  # a file named on the command line is not UTF-8
            click.echo(f"grprune: error: a file is not UTF-8 text (byte "
                       f"0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as "
                       f"UTF-8", err=True)
            ctx.exit(2)
        except (MemoryError, RuntimeError) as exc:
            if "home directory" in str(exc):  # Path.expanduser of ~nosuchuser
                click.echo(f"grprune: error: a path starting with '~' cannot be expanded "
                           f"({str(exc).strip()}); give the full path", err=True)
                ctx.exit(2)
            if not out_of_memory(exc):
                raise
            click.echo(f"grprune: error: out of memory ({out_of_memory(exc)}); lower "
                       f"encoder.hidden, selector.hidden, the layers or train.batch_size",
                       err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("grprune: interrupted; run the same command again to resume", err=True)
            ctx.exit(130)
        finally:
            restore()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is (a command may install its own handler)."""


def _on_sigterm_raise():
    """While a command runs in the main thread with SIGTERM at its default, SIGTERM raises
    :class:`Terminated`, so the command stops as on Ctrl-C (state kept, writes atomic) and
    says how to resume. Returns the function that puts the old handler back."""
    import signal
    import threading
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        return lambda: None

    def on_term(signum, frame):
        raise Terminated

    signal.signal(signal.SIGTERM, on_term)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


def out_of_memory(exc: BaseException) -> str:
    """What ran out, in a few words, when ``exc`` is an allocation failure (``MemoryError``,
    torch's CPU allocator or CUDA's out-of-memory error); else ``""``."""
    import re
    if isinstance(exc, MemoryError):
        return "Python could not allocate"
    text = str(exc)
    asked = re.search(r"tried to allocate ([0-9.]+ ?[KMGT]?i?B|\d+ bytes)", text)
    if "can't allocate memory" in text or "out of memory" in text.lower():
        return f"tried to allocate {asked.group(1)}" if asked else "an allocation failed"
    return ""


@click.group(cls=GrpruneGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "auto_envvar_prefix": "GRPRUNE"})
@click.version_option(package_name="grprune")
@click.option("--plugin", "plugin", multiple=True, metavar="MODULE", allow_from_autoenv=False,
              help="import MODULE (a module name, or the path of a .py file) before the "
                   "command: your own regularizers, selectors, encoders or datasets, "
                   "registered with @REGULARIZERS.register(...) and the like (repeatable). "
                   f"Also read from ${_plugins.ENV} (comma-separated); a sweep's runs "
                   "import the same modules")
@click.pass_context
def main(ctx: click.Context, plugin: tuple[str, ...]) -> None:
    """grprune: out-of-distribution generalization for graph classification.

    PrunE (NeurIPS 2025) prunes spurious edges with a learned subgraph selector,
    regularized by a graph-size constraint (size) and epsilon-probability
    alignment (eps-align). See `grprune ls` for every registered part.
    """
    warnings.formatwarning = _one_line_warning
    ctx.meta[_plugins.ENV] = _plugins.load([*_plugins.from_env(), *plugin])


_python_formatwarning = warnings.formatwarning


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """grprune's own warnings (``"grprune: ..."``) as the one line they are, without
    Python's file, line number and source line; other warnings as Python writes them."""
    text = str(message)
    if text.startswith("grprune:"):
        return text + "\n"
    return _python_formatwarning(message, category, filename, lineno, line)


for _command in (run.run, ls.ls, data.data, sweep.sweep, collect.collect, collect.curves,
                 explain.explain, explain.predict, calibrate.calibrate, tune.tune):
    main.add_command(_command)
