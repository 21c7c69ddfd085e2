"""Files and paths a user names: config files, presets, sweep specs, ``--root``, ``data.path``.

Part of the leaf record layer (:mod:`grprune.record`): it imports only
:mod:`grprune.errors` and :mod:`grprune.hparams`. Each function turns what a hostile or
clumsy input does to Python (``RuntimeError`` from ``~nosuchuser``, ``UnicodeDecodeError``
from a latin-1 file, a YAML alias bomb that expands to a billion elements) into one
:class:`~grprune.errors.GrpruneError` line, before anything large is built.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

from grprune.errors import GrpruneError
from grprune.hparams import MAX_INT_CHARS, MAX_KEY_CHARS
from grprune.messages import short_repr, short_text

#: the largest config file, preset or sweep spec read, in bytes (1 MiB; grprune's own
#: presets are about 2 KB)
MAX_CONFIG_BYTES = 1 << 20


def expand_user(path: str | os.PathLike, what: str) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded (:meth:`pathlib.Path.expanduser`).

    Parameters
    ----------
    path : str or PathLike
    what : str
        How the message names the setting (``"--root"``, ``"data.path"``).

    Raises
    ------
    GrpruneError
        When the home directory cannot be determined (``~nosuchuser/x``, or ``~`` without
        ``$HOME`` and a password entry).

    Examples
    --------
    >>> expand_user("/tmp/x", "--root")
    PosixPath('/tmp/x')
    """
    try:
        return Path(path).expanduser()
    except RuntimeError:  # "Could not determine home directory."
        text = str(path)
        user = text[1:].split("/", 1)[0].split(os.sep, 1)[0]
        who = f"user {user!r}" if user else "the current user"
        raise GrpruneError(f"{what} {short_repr(text)}: cannot expand '~' (no home directory "
                           f"for {who}); give the full path") from None


def read_config_text(path: str | os.PathLike, what: str) -> str:
    """The text of a config file, preset or sweep spec: UTF-8 (a BOM is allowed), at most
    :data:`MAX_CONFIG_BYTES` bytes.

    Raises
    ------
    GrpruneError
        If the file is missing, unreadable, too large or not UTF-8 text (the message names
        the first bad byte and its offset).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise GrpruneError(f"{what} {p} is {size:,} bytes; a config file is at most "
                               f"{MAX_CONFIG_BYTES:,} bytes")
        data = p.read_bytes()
    except OSError as exc:
        raise GrpruneError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GrpruneError(f"{what} {p} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                           f"offset {exc.start}); save it as UTF-8") from None


def load_yaml(text: str, what: str) -> Any:
    """YAML text parsed safely (:class:`yaml.SafeLoader`), with aliases refused.

    An alias (``*name``) lets a 1 KB file name a billion-element structure (the "billion
    laughs"); grprune's config files need none, so a file holding one is refused before
    anything is expanded.

    Raises
    ------
    GrpruneError
        On a YAML syntax error (its first line), an alias, or an integer of more than
        :data:`~grprune.hparams.MAX_INT_CHARS` characters (Python converts at most 4,300
        digits; no setting is near so large).

    Examples
    --------
    >>> load_yaml("train: {epochs: 3}", "config file c.yaml")
    {'train': {'epochs': 3}}
    """
    import yaml

    try:
        return copy.deepcopy(_parse_yaml(text))  # a copy: callers may change what they get
    except _AliasFound as exc:
        raise GrpruneError(f"{what}: line {exc.line} uses a YAML alias (*name); write the "
                           f"value out instead") from None
    except _HugeInteger as exc:
        raise GrpruneError(f"{what}: line {exc.line} holds an integer of {exc.size:,} "
                           f"characters; no setting takes one over {MAX_INT_CHARS:,}") from None
    except yaml.YAMLError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise GrpruneError(f"cannot parse {what}: {short_text(first)}") from None


class _AliasFound(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _HugeInteger(Exception):
    def __init__(self, line: int, size: int) -> None:
        super().__init__(line, size)
        self.line, self.size = line, size


def _bounded_int(text: str) -> int:
    """``int(text)`` for a JSON number, refused past :data:`MAX_INT_CHARS` characters."""
    if len(text) > MAX_INT_CHARS:
        raise ValueError(f"an integer of {len(text):,} characters; no setting takes one "
                         f"over {MAX_INT_CHARS:,}")
    return int(text)


@functools.lru_cache(maxsize=32)
def _parse_yaml(text: str) -> Any:
    """YAML text parsed once (a sweep resolves its preset files once per grid point)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
            if self.check_event(yaml.AliasEvent):
                raise _AliasFound(self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)

        def construct_yaml_int(self, node):  # type: ignore[no-untyped-def]
            if len(node.value) > MAX_INT_CHARS:  # int() refuses 4,300 digits with a traceback
                raise _HugeInteger(node.start_mark.line + 1, len(node.value))
            return super().construct_yaml_int(node)

    NoAliasLoader.add_constructor("tag:yaml.org,2002:int", NoAliasLoader.construct_yaml_int)
    return yaml.load(text, Loader=NoAliasLoader)  # noqa: S506 - a SafeLoader


def load_config_file(path: str | Path) -> dict:
    """Read a JSON or YAML config file.

    Raises
    ------
    GrpruneError
        If the file is missing or not a mapping, or holds a key of more than
        :data:`~grprune.hparams.MAX_KEY_CHARS` characters or an integer of more than
        :data:`~grprune.hparams.MAX_INT_CHARS`.
    """
    p = expand_user(path, "--config")
    if not p.is_file():
        raise GrpruneError(f"config file not found: {p}")
    text = read_config_text(p, "config file")  # UTF-8, bounded size
    if p.suffix in (".yaml", ".yml"):
        data = load_yaml(text, f"config file {p}")  # aliases refused
    else:
        try:
            data = json.loads(text, parse_int=_bounded_int)
        except (ValueError, RecursionError) as exc:
            raise GrpruneError(f"cannot parse config file {p}: "
                               f"{short_text(exc)}") from None
    if not isinstance(data, dict):
        raise GrpruneError(f"config file {p} must hold a mapping of sections")
    check_keys(data, f"config file {p}")
    return data


def check_keys(data: Any, what: str, depth: int = 3) -> None:
    """Refuse a key of a config mapping (sections, settings, a regularizer's settings:
    ``depth`` levels) longer than :data:`~grprune.hparams.MAX_KEY_CHARS` characters,
    before any message quotes it.

    Raises
    ------
    GrpruneError
        One line that shows the key's head and tail and its length.

    Examples
    --------
    >>> check_keys({"train": {"epochs": 3}}, "config file c.yaml")
    """
    if depth <= 0 or not isinstance(data, dict):
        return
    for key, value in data.items():
        if len(str(key)) > MAX_KEY_CHARS:
            raise GrpruneError(f"{what} holds the key {short_repr(str(key), 80)}; a key "
                               f"is at most {MAX_KEY_CHARS} characters")
        check_keys(value, what, depth - 1)
