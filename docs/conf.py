"""Sphinx configuration of collsynth's documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (``pip install -e
".[docs]"`` first). The pages are the Markdown files of this folder (MyST), the README's tour
(included, not copied), the API reference from the docstrings (autodoc with numpydoc), and two
tutorials whose code runs while the site is built (the ``runpython`` directive of
``_ext/runpython.py``), so a change that breaks them breaks the build.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")

project = "collsynth"
author = "collsynth maintainers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc", "runpython"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "README.md"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
# the README's tour is included below a page title, so its sections start one level down
# and the format pages' CSV and elided JSON examples have no lexer that accepts them as shown
suppress_warnings = ["myst.header", "misc.highlighting_failure"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
html_theme = "alabaster"
html_static_path: list[str] = []
html_title = "collsynth"
