"""Help texts in click's conventions: ``PATH`` for a required argument, ``[PATH]`` for an optional
one, ``TEXT``/``INTEGER``/``PATH`` for an option's value and nothing for a flag; and every option
name whole at any width (80 columns included).

Typer 0.29 renders ``{path}``, ``<str>``, ``<bool>`` and ``<list[str]>`` instead and has no setting
to change it, so this module replaces the three display methods of its parameter classes; and its
options table lets rich shorten a long option name to ``--tensor-paralle…`` on a narrow terminal,
so this module replaces the function that draws an options panel with one whose name column never
wraps or shrinks (the help column gives way instead). Both are typer internals, kept here in one
place: pyproject bounds typer's version.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer import core, rich_utils

_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH",
          "file": "FILE", "directory": "DIRECTORY", "int range": "INTEGER RANGE",
          "float range": "FLOAT RANGE", "datetime": "DATETIME"}
_LIST = re.compile(r"^list\[(.*)\]$")


def _click_type(label: str | None) -> str | None:
    """``<list[str]>`` → ``TEXT``, ``<int range>`` → ``INTEGER RANGE``, ``<a|b>`` → ``[a|b]``."""
    if label is None:
        return None
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else label
    inner = _LIST.sub(r"\1", inner)
    if inner in _NAMES:
        return _NAMES[inner]
    if "|" in inner:
        return f"[{inner}]"
    return inner.upper()


_argument_type = getattr(core.TyperArgument, "display_type_rich", None)
_option_type = getattr(core.TyperOption, "display_type_rich", None)


def _argument_display_type(self: core.TyperArgument, ctx: Any) -> str | None:
    return _click_type(_argument_type(self, ctx)) if _argument_type else None


def _option_display_type(self: core.TyperOption, ctx: Any) -> str | None:
    if self.metavar is not None:
        return self.metavar
    if self.is_flag or self.count:
        return None
    shown = _click_type(_option_type(self, ctx)) if _option_type else None
    return shown[:-3] if shown and shown.endswith("...") else shown


def _argument_usage_name(self: core.TyperArgument) -> str:
    name = self.metavar if self.metavar is not None else (self.name or "").upper()
    if not self.required and not name.startswith("["):
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def _argument_rich_name(self: core.TyperArgument) -> str:
    name = self.metavar if self.metavar is not None else (self.name or "").upper()
    return name.strip("[]") + ("..." if self.metavar is None and self.nargs != 1 else "")


def _names(param: Any) -> str:
    """``--chat/--no-chat``, ``--backend, -b``, or an argument's display name."""
    if isinstance(param, core.TyperArgument):
        return str(param.display_name_raw) + ("..." if param.metavar is None and param.nargs != 1 else "")
    ordered = sorted(param.opts, key=lambda o: not o.startswith("--"))  # long names first
    shown = ", ".join(ordered)
    if param.secondary_opts:
        shown += "/" + ", ".join(sorted(param.secondary_opts, key=lambda o: not o.startswith("--")))
    return shown


def _options_panel(*, name: str, params: list[Any], ctx: Any, markup_mode: Any, console: Console) -> None:
    """Typer's options panel with the option names in one column that never wraps or shrinks."""
    if not params:
        return
    rows: list[list[RenderableType]] = []
    for param in params:
        types = Text(style=rich_utils.STYLE_TYPES, overflow="fold")
        shown_type = param.display_type_rich(ctx=ctx)
        if shown_type is not None:
            types.append(shown_type)
        range_str = param._get_number_range_help_str()
        if range_str:
            types.append(rich_utils.RANGE_STRING.format(range_str))
        names = _names(param)
        rendered = (rich_utils.highlighter(names) if "/" not in names or isinstance(param, core.TyperArgument)
                    else Text.assemble(rich_utils.highlighter(names.split("/", 1)[0]), "/",
                                       rich_utils.negative_highlighter(names.split("/", 1)[1])))
        required = Text(rich_utils.REQUIRED_SHORT_STRING, style=rich_utils.STYLE_REQUIRED_SHORT) \
            if param.required else Text("")
        help_cell = rich_utils._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode)
        for item in getattr(help_cell, "renderables", ()):
            if isinstance(item, Text):
                item.overflow = "fold"  # a long path folds onto the next line, never "…"
        rows.append([required, rendered, rich_utils.types_highlighter(types), help_cell])
    table = Table(highlight=True, show_header=False, expand=True, box=None,
                  pad_edge=rich_utils.STYLE_OPTIONS_TABLE_PAD_EDGE,
                  padding=rich_utils.STYLE_OPTIONS_TABLE_PADDING)
    if any(p.required for p in params):
        table.add_column(no_wrap=True, width=1)
    else:
        rows = [row[1:] for row in rows]
    widest = max(len(_names(p)) for p in params)
    table.add_column(no_wrap=True, min_width=widest, max_width=widest)
    table.add_column(no_wrap=False, max_width=16)
    table.add_column(ratio=1, min_width=20)
    for row in rows:
        table.add_row(*row)
    console.print(Panel(table, border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER, title=name,
                        title_align=rich_utils.ALIGN_OPTIONS_PANEL))


def _group_of(param: Any) -> str | None:
    from verify_cli.cli.options import OPTION_GROUPS

    for group, names in OPTION_GROUPS.items():
        if any(name in names for name in param.opts):
            return group
    return None


def _format_help(*, obj: Any, ctx: Any, markup_mode: Any) -> Any:
    """Typer's help, with a long command's options in the groups of ``OPTION_GROUPS``."""
    from verify_cli.cli.options import GROUPED_FROM, OPTION_GROUPS

    options = [p for p in obj.get_params(ctx) if isinstance(p, core.TyperOption)]
    if len(options) < GROUPED_FROM:
        return _rich_format_help(obj=obj, ctx=ctx, markup_mode=markup_mode)
    for param in options:
        if getattr(param, "rich_help_panel", None) is None:
            param.rich_help_panel = _group_of(param)
    order = list(OPTION_GROUPS)
    params = obj.params
    # panels print in the order their first option comes: the command's own, then the groups'
    obj.params = sorted(params, key=lambda p: -1 if getattr(p, "rich_help_panel", None) not in order
                        else order.index(p.rich_help_panel))
    try:
        return _rich_format_help(obj=obj, ctx=ctx, markup_mode=markup_mode)
    finally:
        obj.params = params


_rich_format_help: Any = getattr(rich_utils, "rich_format_help", None)
#: typer's own options panel (the one that cut names short), kept for the test that shows it did
_typer_options_panel = getattr(rich_utils, "_print_options_panel", None)


def install() -> None:
    """Switch typer's help rendering to click's conventions (idempotent; a no-op on a typer
    without these methods, whose help is then typer's own)."""
    if _argument_type is None or _option_type is None:
        return
    core.TyperArgument.display_type_rich = _argument_display_type  # type: ignore[method-assign,assignment]
    core.TyperOption.display_type_rich = _option_display_type  # type: ignore[method-assign]
    core.TyperArgument._usage_display_name = _argument_usage_name  # type: ignore[method-assign]
    core.TyperArgument._rich_display_name = _argument_rich_name  # type: ignore[method-assign]
    if hasattr(rich_utils, "_print_options_panel"):
        rich_utils._print_options_panel = _options_panel
    if _rich_format_help is not None and rich_utils.rich_format_help is _rich_format_help:
        rich_utils.rich_format_help = _format_help
