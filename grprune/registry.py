"""Named registries for grprune's parts (selectors, encoders, regularizers, datasets).

One :class:`Registry` per kind of part. A part is registered by name with a
decorator; outside packages add parts through an entry-point group (e.g.
``grprune.regularizers``), loaded lazily on the first lookup. Lookup normalises
case, ``-`` and ``_``, so ``EPS_align``, ``eps-align`` and ``epsalign`` are the
same name. An unknown name raises :class:`~grprune.errors.GrpruneError` listing
the choices with a "did you mean"; registering a name twice is an error, and so is
registering an object that is not of the registry's :attr:`Registry.base` (a class's
subclass, or a ``runtime_checkable`` protocol's implementation).

Example
-------
>>> reg = Registry("widget")
>>> @reg.register("big-widget", aliases=("bw",))
... class BigWidget:
...     pass
>>> reg.get("BIG_widget") is BigWidget, reg.get("bw") is BigWidget
(True, True)
>>> reg.names()
['big-widget']
"""

from __future__ import annotations

import fnmatch
import inspect
import sys
import warnings
from importlib import metadata
from typing import Any, Callable, Iterable, TypeVar

from grprune.errors import GrpruneError, did_you_mean

T = TypeVar("T")


def normalize(name: str) -> str:
    """Lookup key of ``name``: lower case, without ``-``, ``_`` and spaces."""
    return "".join(ch for ch in str(name).lower() if ch not in "-_ ")


class _Lazy:
    """Placeholder of a part whose module registers it when imported."""

    def __init__(self, module: str) -> None:
        self.module = module


class Registry:
    """A mapping from kebab-case names to classes of one kind of part.

    Parameters
    ----------
    kind : str
        What the parts are, for messages ("regularizer").
    entry_point_group : str, optional
        Entry-point group scanned (once, lazily) for parts from other packages.
    base : type, optional
        What every registered object must be: a subclass of this class, or, for a
        ``typing.Protocol`` marked ``@runtime_checkable``, a class or object that
        satisfies it. None: anything. Settable after construction (a package creates its
        registry before the base class it registers is defined).

    Raises
    ------
    GrpruneError
        From :meth:`add` (so :meth:`register` and entry-point plugins), on an object that
        is not of ``base``; the message names the part, the kind and what it must be.
    """

    def __init__(self, kind: str, entry_point_group: str | None = None, *,
                 base: type | None = None) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.base = base
        self._items: dict[str, Any] = {}  # canonical name -> object
        self._keys: dict[str, str] = {}  # normalised name or alias -> canonical name
        self._plugins_loaded = entry_point_group is None
        self.broken_plugins: dict[str, str] = {}  # entry-point name -> error message

    # -- registration -------------------------------------------------
    def register(self, name: str, aliases: Iterable[str] = ()) -> Callable[[T], T]:
        """Class decorator registering the class under ``name`` (and ``aliases``).

        Raises
        ------
        GrpruneError
            If the name or an alias is already taken.
        """

        def decorator(obj: T) -> T:
            self.add(name, obj, aliases)
            return obj

        return decorator

    def lazy(self, name: str, module: str, aliases: Iterable[str] = ()) -> None:
        """Declare ``name`` (and ``aliases``) as registered by importing ``module``.

        The name resolves (:meth:`canonical`, :meth:`names`, ``in``) without the
        import; :meth:`get` imports the module the first time, whose
        ``register`` decorator then replaces the placeholder. So resolving a
        configuration imports the one module it names, not every part's.

        Raises
        ------
        GrpruneError
            If the name or an alias is already taken.
        """
        self.add(name, _Lazy(module), aliases)

    def check(self, name: str, obj: Any) -> None:
        """Raise a GrpruneError unless ``obj`` is of :attr:`base` (see the class)."""
        base = self.base
        if base is None or isinstance(obj, _Lazy):  # a placeholder: checked when it registers
            return
        # typing marks a Protocol (not a class implementing one) in its own __dict__
        if base.__dict__.get("_is_protocol", False):
            if not base.__dict__.get("_is_runtime_protocol", False):
                raise GrpruneError(f"{self.kind} registry: its base {base.__qualname__} is a "
                                   f"Protocol without @runtime_checkable, which cannot be "
                                   f"checked")
            # isinstance, not issubclass: a class's attributes (methods and data members
            # alike, which issubclass refuses) are looked up on the class object itself
            ok = isinstance(obj, base)
            what = f"implement the protocol {base.__module__}.{base.__qualname__}"
        else:
            ok = inspect.isclass(obj) and issubclass(obj, base)
            what = f"be a subclass of {base.__module__}.{base.__qualname__}"
        if not ok:
            shown = (f"{obj.__module__}.{obj.__name__}" if inspect.isclass(obj)
                     else f"{type(obj).__qualname__} object")
            raise GrpruneError(f"{self.kind} {name!r} ({shown}) cannot be registered: a "
                               f"{self.kind} must {what}")

    def add(self, name: str, obj: Any, aliases: Iterable[str] = ()) -> None:
        """Register ``obj`` under ``name``; see :meth:`register`.

        Raises
        ------
        GrpruneError
            If the name or an alias is already taken, or ``obj`` is not of :attr:`base`.
        """
        self.check(name, obj)
        if isinstance(self._items.get(name), _Lazy) and not isinstance(obj, _Lazy):
            self._items[name] = obj  # the declared module registering itself
            for key in aliases:
                self._keys.setdefault(normalize(key), name)
            try:
                obj.registered_name = name
            except (AttributeError, TypeError):
                pass
            return
        for key in (name, *aliases):
            norm = normalize(key)
            if norm in self._keys:
                raise GrpruneError(
                    f"{self.kind} name {key!r} is already registered "
                    f"(by {self._keys[norm]!r}); choose another name"
                )
        self._items[name] = obj
        for key in (name, *aliases):
            self._keys[normalize(key)] = name
        try:
            obj.registered_name = name
        except (AttributeError, TypeError):
            pass

    def unregister(self, name: str) -> None:
        """Remove ``name`` and its aliases (used by tests and notebooks)."""
        canonical = self._keys.get(normalize(name))
        if canonical is None:
            return
        del self._items[canonical]
        for key in [k for k, v in self._keys.items() if v == canonical]:
            del self._keys[key]

    # -- plugins -------------------------------------------------------
    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        group = self.entry_point_group
        if group is None:  # no entry-point group, no plugins (_plugins_loaded starts True then)
            return
        try:
            eps = metadata.entry_points(group=group)
        except Exception as exc:  # pragma: no cover - broken metadata
            warnings.warn(f"could not list {self.entry_point_group} entry points: {exc}")
            return
        for ep in eps:
            if normalize(ep.name) in self._keys:
                continue  # already registered (e.g. the module was imported directly)
            try:
                obj = ep.load()
                if normalize(ep.name) not in self._keys:
                    self.add(ep.name, obj)
            except Exception as exc:  # a broken plugin must not break other runs
                msg = f"{type(exc).__name__}: {exc}"
                self.broken_plugins[ep.name] = msg
                print(
                    f"grprune: warning: {self.kind} plugin {ep.name!r} ({ep.value}) "
                    f"failed to load and was skipped: {msg}",
                    file=sys.stderr,
                )

    # -- lookup --------------------------------------------------------
    def names(self, pattern: str = "*", load_plugins: bool = True) -> list[str]:
        """Registered canonical names matching the glob ``pattern``, sorted.

        ``load_plugins=False`` lists only what is registered so far (no
        entry-point scan), e.g. for help texts.
        """
        if load_plugins:
            self._load_plugins()
        return sorted(n for n in self._items if fnmatch.fnmatch(n, pattern))

    def __contains__(self, name: str) -> bool:
        self._load_plugins()
        return normalize(name) in self._keys

    def canonical(self, name: str) -> str:
        """The canonical name for ``name`` (an alias or any spelling).

        Raises
        ------
        GrpruneError
            If ``name`` is unknown; the message lists the choices.
        """
        self._load_plugins()
        norm = normalize(name)
        if norm in self._keys:
            return self._keys[norm]
        choices = self.names()
        hint = did_you_mean(name, choices)
        broken = ""
        if str(name) in self.broken_plugins:
            broken = f" (plugin {name!r} failed to load: {self.broken_plugins[str(name)]})"
        raise GrpruneError(
            f"unknown {self.kind} {name!r}{broken}.{hint} Choices: {', '.join(choices)}"
        )

    def get(self, name: str) -> Any:
        """The object registered under ``name`` (importing its module if it was
        declared with :meth:`lazy`); see :meth:`canonical` for errors."""
        canonical = self.canonical(name)
        obj = self._items[canonical]
        if isinstance(obj, _Lazy):
            import importlib
            importlib.import_module(obj.module)
            obj = self._items[canonical]
            if isinstance(obj, _Lazy):
                raise GrpruneError(f"{self.kind} {canonical!r}: module {obj.module} "
                                   f"did not register it")
        return obj

    def make(self, name: str, **kwargs: Any) -> Any:
        """Instantiate the part registered under ``name`` with ``kwargs``."""
        return self.get(name)(**kwargs)

    def split(self, names: str | Iterable[str]) -> list[str]:
        """Canonical names of a comma list (``"size,eps-align"``); ``none`` is empty.

        Raises
        ------
        GrpruneError
            On an unknown or repeated name.
        """
        if isinstance(names, str):
            parts = [p.strip() for p in names.split(",") if p.strip()]
        else:
            parts = [str(p).strip() for p in names]
        if [normalize(p) for p in parts] in ([], ["none"], ["erm"]):
            return []
        out = [self.canonical(p) for p in parts]
        if len(set(out)) != len(out):
            raise GrpruneError(f"{self.kind} listed twice in {','.join(parts)!r}")
        return out

    def make_many(self, names: str | Iterable[str], **kwargs: Any) -> list[Any]:
        """Instantiate every part of a comma list; see :meth:`split`."""
        return [self.make(n, **kwargs) for n in self.split(names)]
