"""``grprune ls``: the registered parts with their hyperparameters and defaults, and the
presets."""

from __future__ import annotations

import click


def _presets_table():
    """``grprune ls presets``: every preset, its description and values per dataset."""
    from rich.markup import escape
    from rich.table import Table

    from grprune import presets
    table = Table(title="presets (--preset NAME; auto = each dataset's default)",
                  show_lines=True)
    for col in ("name", "applies to", "settings"):
        table.add_column(col)
    listed = presets.defaults()
    for name, path in presets.available().items():
        preset = presets.parse(path, name)
        chosen = [key for key, p in listed.items() if p == name]
        if name == presets.FALLBACK:
            chosen.append("every dataset and split defaults.yaml does not list"
                          if listed else "every dataset")
        head = f"{name}\n{preset.description}\n({path})"
        if chosen:
            head += f"\ndefault for: {', '.join(chosen)}"
        table.add_row(escape(head), "every dataset",
                      escape("\n".join(f"{k} = {v}" for k, v in preset.all.items())) or "-")
        for ds, values in preset.datasets.items():
            table.add_row("", ds, escape("\n".join(f"{k} = {v}" for k, v in values.items())))
    return table


@click.command("ls")
@click.argument("kind", required=False,
                type=click.Choice(["selectors", "encoders", "regularizers", "datasets", "train",
                                   "presets"]))
def ls(kind) -> None:
    """List registered parts with their hyperparameters and defaults, and the presets."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from grprune.data.registry import DATASETS
    from grprune.encoders.base import ENCODERS
    from grprune.record.settings import DataSettings, ModelSettings, TrainSettings
    from grprune.regularizers.base import REGULARIZERS
    from grprune.selectors.base import SELECTORS

    console = Console(width=140)
    groups = {"selectors": ("selector", SELECTORS), "encoders": ("encoder", ENCODERS),
              "regularizers": ("reg.NAME", REGULARIZERS), "datasets": ("data", DATASETS)}

    def new_table(title: str, first: tuple[str, ...]) -> Table:
        table = Table(title=title, show_lines=False)
        for col in (*first, "default", "domain", "search", "description"):
            table.add_column(col)
        return table

    def add_rows(table: Table, cls, prefix: str, lead: tuple[str, ...]) -> None:
        for key, default, text, domain in cls.describe_hparams():
            if prefix == "data" and key == "split":
                domain = "one of " + ", ".join(cls.splits)
            param = cls.params.get(key)
            search = ", ".join(map(str, param.search)) if param and param.search else ""
            table.add_row(*lead, f"{prefix}.{key}", escape(str(default)), escape(domain),
                          escape(search), escape(text))

    for name, (prefix, registry) in groups.items():
        if kind not in (None, name):
            continue
        table = new_table(name, ("name", "hyperparameter"))
        for part in registry.names():
            cls = registry.get(part)
            doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
            if name == "datasets":
                doc = f"{cls.description}. Splits: {', '.join(cls.splits)}."
            table.add_row(part, "", "", "", "", escape(doc))
            add_rows(table, cls, prefix.replace("NAME", part), ("",))
        console.print(table)
    if kind in (None, "train"):
        table = new_table("train, model and data settings", ("hyperparameter",))
        for prefix, cls in (("train", TrainSettings), ("model", ModelSettings),
                            ("data", DataSettings)):
            add_rows(table, cls, prefix, ())
        console.print(table)
    if kind in (None, "presets"):
        console.print(_presets_table())
    broken = {**REGULARIZERS.broken_plugins, **SELECTORS.broken_plugins,
              **DATASETS.broken_plugins}
    for ep, msg in broken.items():
        console.print(f"[yellow]plugin {escape(repr(ep))} failed to load: "
                      f"{escape(str(msg))}[/yellow]")
