"""Command-line options shared by several commands, each declared once.

``grprune run`` trains one configuration; ``grprune sweep`` takes the same options and
runs every combination of their values. Both take their common options from
:data:`SHARED` through :func:`model_options` and :func:`training_options`, so help
text, defaults and behaviour cannot drift apart. Where ``sweep`` must differ (it takes
a comma list of values, or several regularizer sets, where ``run`` takes one value),
the difference is declared beside the option, in :attr:`SharedOption.sweep`.

Help texts that list registered parts are computed when help is shown, not when the
CLI is imported, so ``grprune --help`` and ``grprune collect`` import no dataset
module (and so neither RDKit nor OGB).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import click


def _names(kind: str) -> str:
    """The registered names of one kind of part (``data``, ``encoder``, ``reg``,
    ``selector``), comma-separated; imports that registry."""
    if kind == "data":
        from grprune.data.registry import DATASETS as registry
    elif kind == "encoder":
        from grprune.encoders.base import ENCODERS as registry
    elif kind == "reg":
        from grprune.regularizers.base import REGULARIZERS as registry
    else:
        from grprune.selectors.base import SELECTORS as registry
    return ", ".join(registry.names(load_plugins=False))


class Option(click.Option):
    """A click option whose help text may be a callable, called each time help is shown.

    ``help=lambda: f"... one of: {_names('selector')}"`` imports the registry only when
    a user asks for the command's help, and lists the parts registered by then
    (``--plugin`` modules included).
    """

    def __init__(self, *args: Any, help: str | Callable[[], str] | None = None,
                 **kwargs: Any) -> None:
        self._help_fn = help if callable(help) else None
        # mypy reads *args as possibly holding help; it is keyword-only here
        super().__init__(*args, help=None if callable(help) else help,  # type: ignore[misc]
                         **kwargs)

    @property
    def help(self) -> str | None:  # type: ignore[override]
        return self._help_fn() if self._help_fn is not None else self._help

    @help.setter
    def help(self, value: str | None) -> None:
        self._help = value

    def type_cast_value(self, ctx: click.Context, value: Any) -> Any:
        """A number given as more than :data:`MAX_NUMBER_CHARS` characters is refused with
        the value shortened (click would quote all of it, and ``int()`` refuses over 4,300
        digits); everything else is click's."""
        if (isinstance(self.type, (click.types.IntParamType, click.types.FloatParamType))
                and isinstance(value, str) and len(value) > MAX_NUMBER_CHARS):
            from grprune.messages import short_repr
            raise click.BadParameter(f"{short_repr(value, 100)} is not a number it takes "
                                     f"(at most {MAX_NUMBER_CHARS} characters)", ctx, self)
        return super().type_cast_value(ctx, value)


#: the most characters of a number given to an option (the largest seed, 2**64, has 20)
MAX_NUMBER_CHARS = 40


#: ``@option(...)``: a click option with help text (possibly lazy) and its environment
#: variable shown in ``--help``
option = functools.partial(click.option, cls=Option, show_envvar=True)

#: metavar of an option that ``grprune sweep`` takes as a comma list
AXIS = "A[,B...]"


@dataclass(frozen=True)
class SharedOption:
    """One option of ``grprune run`` that ``grprune sweep`` takes too.

    Attributes
    ----------
    decls : tuple of str
        Option names and parameter name, as for :func:`click.option`.
    attrs : dict
        Keyword arguments of :func:`click.option` (``help``, ``default``, ``type``, ...).
    sweep : dict
        What differs in ``grprune sweep``: keys of ``attrs`` to replace, and ``decls``.
    """

    decls: tuple[str, ...]
    attrs: dict = field(default_factory=dict)
    sweep: dict = field(default_factory=dict)

    def declare(self, command: str) -> Callable:
        """The click decorator of this option in ``command`` (``run`` or ``sweep``)."""
        attrs = {**self.attrs, **(self.sweep if command == "sweep" else {})}
        decls = attrs.pop("decls", self.decls)
        return option(*decls, **attrs)


_S = SharedOption

#: every option that ``run`` and ``sweep`` share, in the order of their help
SHARED: dict[str, SharedOption] = {
    # -- the parts of a run (model_options) --
    "selector": _S(("--selector",), dict(
        default=None, help=lambda: "subgraph selector: auto (gumbel-gin when a regularizer "
                                   f"needs one), none, or one of: {_names('selector')}"),
        sweep=dict(metavar=AXIS)),
    "reg": _S(("--reg",), dict(
        default=None, help=lambda: "comma list of regularizers, or none for plain ERM "
                                   f"[default: size,eps-align]. Built in: {_names('reg')}"),
        sweep=dict(multiple=True, metavar="SET", help=lambda: (
            "one regularizer set, a comma list (size,eps-align is PrunE, none is ERM); "
            "repeat --reg, or separate sets with ';', for alternatives: "
            f"--reg size,eps-align --reg none. Built in: {_names('reg')}"))),
    "data": _S(("--data",), dict(
        default=None,
        help=lambda: f"dataset, or your file (.csv, .csv.gz: molecule-csv; .bin: dgl-graphs) "
                     f"[default: ogbg-molbbbp]. Built in: {_names('data')}"),
        sweep=dict(metavar=AXIS)),
    "split": _S(("--split",), dict(
        default=None, help="dataset split, e.g. scaffold or size (see `grprune ls datasets`)"),
        sweep=dict(metavar=AXIS)),
    "shift": _S(("--shift",), dict(
        default=None, help="distribution shift of GOOD datasets: covariate or concept"),
        sweep=dict(metavar=AXIS)),
    "encoder": _S(("--encoder",), dict(
        default=None, help=lambda: f"GNN encoder [default: gin]. Built in: {_names('encoder')}"),
        sweep=dict(metavar=AXIS)),
    "preset": _S(("--preset",), dict(
        default=None,
        help="named bundle of settings per dataset: official, paper, good, a preset of "
             "yours (`grprune ls presets`) or a preset file [default: auto: official, the "
             "official code's recipe, unless another validated better on the dataset's "
             "split, e.g. paper for ogbg-molbbbp scaffold]"),
        sweep=dict(metavar=AXIS)),
    # -- training and data loading (training_options) --
    "epochs": _S(("--epochs",), dict(type=int, default=None,
                                     help="training epochs [default: 100]"),
                 sweep=dict(type=str, metavar="N[,N...]")),
    "seed": _S(("--seed",), dict(type=int, default=None, help="random seed [default: 0]"),
               sweep=dict(decls=("--seeds", "--seed", "seeds"), type=str, metavar="SEEDS",
                          help="seeds: a range 1-4 (inclusive), a list 0,2,5, or both: 0-3,7 "
                               "[default: 0]")),
    "overrides": _S(("-H", "--hparam", "overrides"), dict(
        multiple=True, metavar="KEY=VALUE",
        help="override any hyperparameter by namespaced key, e.g. -H reg.size.eta=0.75 "
             "-H selector.tau=0.5 -H train.lr=1e-3, or -H data.limit=300 (the first 300 "
             "graphs of each split part, for a quick try) (repeatable; every key: "
             "`grprune ls`)"),
        sweep=dict(metavar="KEY=V1[,V2...]",
                   help="sweep a hyperparameter over a comma list, e.g. -H "
                        "reg.size.eta=0.75,0.85 (repeatable; \\, is a literal comma). An "
                        "override that names a part a configuration lacks (reg.size.* with "
                        "--reg none) is dropped for it")),
    "device": _S(("--device",), dict(
        default=None, help="auto (CUDA when present), cpu, cuda or cuda:N [default: auto]")),
    "root": _S(("--root",), dict(
        default=None, help="data root (caches, OGB folders) [default: $GRPRUNE_DATA_ROOT "
                           "or ~/.cache/grprune/data]")),
    "download": _S(("--download",), dict(
        is_flag=True, default=False,
        help="use OGB's online download route instead of the bundled data")),
    "config_file": _S(("--config", "config_file"), dict(
        type=click.Path(path_type=Path), default=None,
        help="JSON/YAML config file with the sections of config.json; every run starts "
             "from it")),
    # -- experiment trackers (log_option) --
    "log": _S(("--log", "logs"), dict(
        multiple=True, metavar="tensorboard[:DIR]|mlflow[:URI]",
        help="log every epoch to an experiment tracker (repeatable): tensorboard "
             "[default DIR: <run dir>/tensorboard; sweep/tune: <out>/tensorboard] or mlflow "
             "[default URI: $MLFLOW_TRACKING_URI, else sqlite:///<run dir's parent or "
             "out>/mlflow.db]; a resumed run continues its tracker run. Needs pip install "
             "'grprune[tensorboard]' / 'grprune[mlflow]'")),
    # -- display (progress_option) --
    "progress": _S(("--progress",), dict(
        type=click.Choice(["auto", "rich", "plain", "none"]), default=None,
        help="progress display [default: auto: rich on a terminal, plain lines otherwise]")),
}

MODEL = ("selector", "reg", "data", "split", "shift", "encoder", "preset")
TRAINING = ("epochs", "seed", "overrides", "device", "root", "download", "config_file")


def _apply(names: tuple[str, ...], command: str) -> Callable:
    def decorator(func: Callable) -> Callable:
        for name in reversed(names):  # the first name is listed first in --help
            func = SHARED[name].declare(command)(func)
        return func
    return decorator


def model_options(command: str) -> Callable:
    """``--selector --reg --data --split --shift --encoder --preset`` of ``command``."""
    return _apply(MODEL, command)


def training_options(command: str) -> Callable:
    """``--epochs --seed -H --device --root --download --config`` of ``command``."""
    return _apply(TRAINING, command)


def progress_option(command: str) -> Callable:
    """``--progress`` of ``command``."""
    return _apply(("progress",), command)


def log_option(command: str) -> Callable:
    """``--log`` of ``command``."""
    return _apply(("log",), command)


def launcher_options(func: Callable) -> Callable:
    """``--launcher --address --cpus-per-run`` of the commands that start runs as children
    (sweep, tune); not shared with ``run``, so not in :data:`SHARED`."""
    func = option("--cpus-per-run", type=click.FloatRange(min=0, min_open=True), default=1.0,
                  show_default=True,
                  help="Ray: num_cpus of each run's task (and its torch threads)")(func)
    func = option("--address", default=None,
                  help="Ray cluster address (auto, ray://host:10001, ...) [default: start a "
                       "local Ray instance with --workers CPUs and shut it down at the "
                       "end]")(func)
    return option("--launcher", type=click.Choice(["local", "ray"]), default="local",
                  show_default=True,
                  help="local: child processes on this machine. ray: one Ray task per run (a "
                       "tune trial is a run), each running the same child command; needs pip "
                       "install 'grprune[ray]', and --out, the data root and a tune's "
                       "--storage reachable from every Ray worker")(func)


def check_launcher_options(params: dict, dry_run: bool = False) -> None:
    """Refuse ``--address`` without ``--launcher ray``; check that ray is installed when
    it is asked for (not for a ``--dry-run``, which starts nothing).

    Raises
    ------
    click.UsageError
        ``--address`` without ``--launcher ray``.
    GrpruneError
        ``--launcher ray`` without the ray package.
    """
    if params["address"] and params["launcher"] != "ray":
        raise click.UsageError("--address goes with --launcher ray")
    if params["launcher"] == "ray" and not dry_run:
        from grprune.sweep.launchers import require_ray
        require_ray()
