"""``runpython``: a directive that runs its Python while the site is built and shows the code
and what it printed, so that a page's examples cannot drift from the code. The blocks of one
page share one namespace, in order; an exception fails the build (``-W``) with the page, the
block's line and the traceback.

``:output: rst`` parses what the block printed as reStructuredText (use it inside an
``{eval-rst}`` block: generated ``automodule`` entries, tables); ``:hide-code:`` shows only the
output.
"""

from __future__ import annotations

import contextlib
import io
import traceback

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


class RunPython(SphinxDirective):
    """Run the block's code; show it and its standard output."""

    has_content = True
    option_spec = {"output": directives.unchanged, "hide-code": directives.flag}

    def run(self) -> list[nodes.Node]:
        namespace = self.env.temp_data.setdefault("runpython", {"__name__": f"page_{self.env.docname}"})
        code = "\n".join(self.content)
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(code, f"<{self.env.docname}.md, line {self.lineno}>", "exec"), namespace)
        except Exception:  # noqa: BLE001 - reported as the build's error, with the traceback
            raise self.error(f"the example raised:\n{traceback.format_exc()}") from None
        out = printed.getvalue()
        shown: list[nodes.Node] = []
        if "hide-code" not in self.options:
            shown.append(nodes.literal_block(code, code, language="python"))
        if self.options.get("output") == "rst":
            holder = nodes.container()
            self.state.nested_parse(StringList(out.splitlines(), source=self.env.docname), self.content_offset, holder)
            shown.extend(holder.children)
        elif out.strip():
            shown.append(nodes.literal_block(out, out, language="text"))
        return shown


def setup(app):
    app.add_directive("runpython", RunPython)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
