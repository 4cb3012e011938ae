"""Tables the commands print for a person, readable at 80 columns and when piped.

A session key folds only after one of its `:`, never inside a component (`KeyCell`), so a
folded key still reads, and copies, as its parts; and a column empty in every row is left out
(`table_of`) instead of taking room from the ones that say something.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult

__all__ = ["KeyCell", "table_of"]

# A key's components, each with the `:` that ends it.
_PARTS = re.compile(r"[^:]*:|[^:]+$")


class KeyCell:
    """A session key in a table cell, folded between its components when the column is
    narrower than the key (a single component longer than the column still folds inside)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.parts = _PARTS.findall(key) or [key]

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(max(cell_len(p) for p in self.parts), cell_len(self.key))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 1)
        lines: list[str] = []
        line = ""
        for part in self.parts:
            if line and cell_len(line + part) > width:
                lines.append(line)
                line = ""
            line += part
        lines.append(line)
        # Plain text: a key may hold `[...]`, which is never markup.
        yield Text("\n".join(lines), overflow="fold")


def table_of(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[RenderableType]],
    *,
    no_wrap: Sequence[str] = (),
) -> Table:
    """A table of `rows`, without the columns that are empty in every row."""
    keep = [
        i
        for i in range(len(columns))
        if not rows or any(not (isinstance(row[i], str | Text) and not str(row[i])) for row in rows)
    ]
    table = Table(title=title, title_justify="left")
    for i in keep:
        table.add_column(columns[i], overflow="fold", no_wrap=columns[i] in no_wrap)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table
