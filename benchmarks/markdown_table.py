"""The Markdown tables the benchmarks print: a header, an alignment line, a line per row.

>>> print("\\n".join(table(["case", "s"], [["ring", 1.5]], align=["---", "---:"])))
| case | s |
|---|---:|
| ring | 1.5 |
"""

from __future__ import annotations

from typing import Any, Iterable


def table(header: list[str], rows: Iterable[list[Any]], align: list[str] | None = None,
          stream: bool = False) -> list[str]:
    """The lines of a table of ``header`` and ``rows`` (each a list of cells, shown by
    ``str``); ``align``: each column's alignment cell (default ``---``). With ``stream`` each
    line is printed as soon as its row is computed (a long benchmark shows its progress)."""
    lines: list[str] = []

    def add(cells: list[Any]) -> None:
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        if stream:
            print(lines[-1], flush=True)

    add(header)
    lines.append("|" + "|".join(align or ["---"] * len(header)) + "|")
    if stream:
        print(lines[-1], flush=True)
    for cells in rows:
        add(cells)
    return lines
