"""The result schema, for the results' modules: :mod:`collsynth.tens.schema` (where the
producers' pipeline uses it too, without importing :mod:`collsynth.results`).

``python -m collsynth.results.schema`` prints the result-columns table of ``docs/results.md``.
"""

from __future__ import annotations

from ..tens.schema import *  # noqa: F401,F403 - the schema's public names
from ..tens.schema import markdown

if __name__ == "__main__":
    print(markdown())
