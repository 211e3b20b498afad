"""What the benchmarks that measure peak memory share: each row run in a process of its own
(so its peak resident memory is its own), and the cells of their Markdown tables.

>>> cell(None, ".2f"), cell(1234567, ","), cell(0.5, ".2f")
('-', '1,234,567', '0.50')
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any, Callable, Iterable


def cell(value: Any, spec: str) -> str:
    """``value`` formatted by ``spec``, or ``-`` where it was not measured (``None``)."""
    return "-" if value is None else format(value, spec)


def each_in_a_fresh_process(row: Callable[[Any], dict], specs: Iterable[Any],
                            progress: Callable[[dict], str]) -> list[dict]:
    """``row(spec)`` for each spec, each in a newly spawned process (module-level ``row`` only);
    ``progress(result)`` is printed as each finishes."""
    ctx = mp.get_context("spawn")
    results = []
    for spec in specs:
        with ctx.Pool(1) as pool:
            results.append(pool.apply(row, (spec,)))
        print(progress(results[-1]), flush=True)
    return results
