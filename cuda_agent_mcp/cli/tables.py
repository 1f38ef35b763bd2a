"""Tables that never cut an id: a rich table on a terminal wide enough for the kept columns, plain
aligned text otherwise (and always when the output is not a terminal, so pipes and files get every
character of every cell, at any width)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

# Other columns may wrap down to this many cells (or their header's width, if wider).
NARROWEST = 10


@dataclass(frozen=True)
class Column:
    header: str
    keep: bool = False  # ids, paths, option and kernel names: never wrapped, never cut
    justify: Literal["left", "right"] = "left"


def print_table(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]], *, title: str = ""
) -> None:
    """Print `rows` (cells in rich markup; escape data before) under `title`."""
    plain = [[Text.from_markup(cell).plain for cell in row] for row in rows]
    widths = [max([len(column.header), *(len(row[i]) for row in plain)]) for i, column in enumerate(columns)]
    least = [
        width if column.keep else max(len(column.header), min(width, NARROWEST))
        for column, width in zip(columns, widths, strict=True)
    ]
    # A heavy-head table spends 3 cells per column (padding and a border) and one more at the end.
    fits = sum(least) + 3 * len(columns) + 1 <= console.width
    if console.is_terminal and fits:
        _rich(console, columns, rows, widths, title)
    else:
        _plain(console, columns, plain, widths, title)


def _rich(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]], widths: list[int], title: str
) -> None:
    table = Table()
    for column, width in zip(columns, widths, strict=True):
        if column.keep:
            table.add_column(column.header, justify=column.justify, no_wrap=True, min_width=width)
        else:
            table.add_column(
                column.header, justify=column.justify, overflow="fold", min_width=len(column.header)
            )
    for row in rows:
        table.add_row(*row)
    if title:
        console.print(title, highlight=False)
    console.print(table)


def _plain(
    console: Console, columns: Sequence[Column], rows: list[list[str]], widths: list[int], title: str
) -> None:
    """Columns padded to their widest cell, two spaces apart; lines as long as they need to be."""

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(width) if column.justify == "right" else cell.ljust(width)
            for cell, column, width in zip(cells, columns, widths, strict=True)
        ]
        return "  ".join(padded).rstrip()

    text = "\n".join(
        [
            *([Text.from_markup(title).plain] if title else []),
            line([c.header for c in columns]),
            *map(line, rows),
        ]
    )
    console.print(text, markup=False, highlight=False, soft_wrap=True, crop=False)


def print_fields(console: Console, fields: Sequence[tuple[str, str]]) -> None:
    """Label and value pairs (values in rich markup): a grid whose values wrap on a terminal, one line
    per field otherwise."""
    if console.is_terminal:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for label, value in fields:
            grid.add_row(label, value)
        console.print(grid)
        return
    width = max((len(label) for label, _ in fields), default=0)
    text = "\n".join(f"{label.ljust(width)}  {Text.from_markup(value).plain}" for label, value in fields)
    console.print(text, markup=False, highlight=False, soft_wrap=True, crop=False)


def print_panel(console: Console, title: str, body: str) -> None:
    """A titled box on a terminal; the title and the body's lines, unwrapped, otherwise."""
    if console.is_terminal:
        console.print(Panel(body, title=title, title_align="left"))
        return
    text = "\n".join([f"{title}:", *(f"  {line}" for line in Text.from_markup(body).plain.splitlines())])
    console.print(text, markup=False, highlight=False, soft_wrap=True, crop=False)
