"""The format pages in docs/ against the code: every key they document is one the loaders
know, every key the loaders accept is documented, and their examples run as written."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from collsynth import InputError
from collsynth.instances import KINDS, generators
from collsynth.instances import files as topology_files
from collsynth.instances import instance as instance_file
from collsynth.results import schema
from collsynth.solvers import batch as runner
from collsynth.tens import cost_models
from collsynth.tens import schedule as schedule_file
from collsynth.tens.verify import verify

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = ("instances.md", "topology-files.md", "schedules.md", "results.md", "cost-models.md")


def page(name: str) -> str:
    return (DOCS / name).read_text()


def section(text: str, heading: str) -> str:
    """The lines under the Markdown heading ``heading`` up to the next heading of its level or above."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading and line.startswith("#"))
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
    return "\n".join(lines[start + 1:end])


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in ``text`` (header and rule rows left out)."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|") and not set(line) <= set("|-: ")]


def first_column(text: str) -> set[str]:
    """Every `name` in the first cell of the table rows under a section."""
    return {name for row in table_rows(text) for name in re.findall(r"`([^`]+)`", row[0])}


def example_files(text: str, folder: Path) -> list[Path]:
    """Write the page's ``<!-- file: NAME -->`` code blocks into ``folder``."""
    out = []
    for m in re.finditer(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", text, re.S):
        path = folder / m.group(1)
        path.write_text(m.group(2))
        out.append(path)
    return out


# ---- instances.md -------------------------------------------------------------------------------

def test_instance_keys_are_the_loaders_keys():
    text = page("instances.md")
    assert first_column(section(text, "Top-level keys")) == instance_file.TOP_KEYS
    assert first_column(section(text, "`[topology]`").split("### ")[0]) == instance_file.TOPOLOGY_KEYS
    assert first_column(section(text, "`[collective]`")) == instance_file.COLLECTIVE_KEYS
    assert first_column(section(text, "`[expect]`").split("### ")[0]) == set(instance_file.EXPECT_KEYS)
    assert first_column(section(text, "`[[expect.paper]]`")) == set(instance_file.PAPER_KEYS)
    metric_row = next(r for r in table_rows(section(text, "`[[expect.paper]]`")) if r[0] == "`metric`")
    assert set(re.findall(r"`([^`]+)`", metric_row[2])) - {"reference"} == set(instance_file.PAPER_METRICS)
    epoch_row = next(r for r in table_rows(section(text, "Top-level keys")) if r[0] == "`epoch`")
    assert set(re.findall(r'`"([^`"]+)"`', epoch_row[3])) == set(instance_file.EPOCHS)
    assert first_column(section(text, "Suites (`instances/corpus/suites.toml`)")) == set(runner.SUITE_KEYS)
    kind_row = next(r for r in table_rows(section(text, "`[collective]`")) if r[0] == "`kind`")
    assert re.findall(r"`([^`]+)`", kind_row[3]) == list(KINDS)


def documented_default(cell: str, key: str):
    """The value after ``default`` in the ``(type, default V)`` of `key` in a generator row."""
    m = re.search(rf"`{key}` \([^,)]+(?:, default ([^)]+))?\)", cell)
    assert m, key
    text = m.group(1)
    if text is None:
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # words: how the generator decides


def test_every_generator_and_parameter_is_documented():
    rows = table_rows(section(page("instances.md"), "Generators and their parameters"))
    documented = {re.findall(r"`([^`]+)`", r[0])[0]: r[1] for r in rows if r[0].startswith("`")}
    assert set(documented) == set(generators.GENERATORS)
    for name, cell in documented.items():
        params = generators.parameters(name)
        assert set(re.findall(r"`([^`]+)`", cell)) == set(params), name
        for key, spec in params.items():
            if spec["default"] is not None:
                assert documented_default(cell, key) == spec["default"], (name, key)


def test_the_new_machine_walkthrough_works(tmp_path):
    from collsynth import api

    files = example_files(page("instances.md"), tmp_path)
    assert [p.name for p in files] == ["my8gpu.csv", "my8gpu.toml"]
    inst = api.load_instance(tmp_path / "my8gpu.toml")
    topo = inst.topology
    # two boards of four fully connected GPUs (2 * 6 links) and 4 links between them, both ways
    assert (topo.size, topo.num_links, topo.diameter) == (8, 32, 2)
    assert sorted({d["bandwidth"] for _, _, d in topo.graph.edges(data=True)}) == [25e9, 50e9]
    assert {d["alpha"] for _, _, d in topo.graph.edges(data=True)} == {1e-6}
    assert inst.collective.kind == "allreduce" and inst.collective.message_bytes == 64 * 2**20
    assert api.solve(inst, "ring").verified
    csv = tmp_path / "my8gpu.csv"
    csv.write_text(csv.read_text().replace("# directed = false\n", ""))
    with pytest.raises(InputError, match="the file's links are one-way"):
        api.load_instance(tmp_path / "my8gpu.toml")


# ---- topology-files.md --------------------------------------------------------------------------

def test_topology_file_keys_are_the_readers_keys():
    text = page("topology-files.md")
    csv = section(text, "CSV edge lists (`.csv`)")
    tables = csv.split("\n\n")
    columns = next(t for t in tables if t.startswith("| column"))
    settings = next(t for t in tables if t.startswith("| setting"))
    assert first_column(columns) == set(topology_files.CSV_COLUMNS)
    assert first_column(settings) == set(topology_files.CSV_SETTINGS)
    assert first_column(section(text, "Directedness")) == set(topology_files.FORMATS)


def test_topology_file_examples_read_as_described(tmp_path):
    ring4, path3 = example_files(page("topology-files.md"), tmp_path)
    topo = topology_files.read_topology(ring4, bandwidth=100e9, alpha=0.5e-6)
    assert (topo.size, topo.num_links, topo.name) == (4, 8, "ring4")
    fast = {(u, v) for u, v, d in topo.graph.edges(data=True) if d["bandwidth"] == 200e9 and d["alpha"] == 0.2e-6}
    assert fast == {(3, 0), (0, 3)}
    topo = topology_files.read_topology(path3)
    assert (topo.size, topo.num_links) == (3, 4) and topo.meta["labels"] == ["gpu0", "gpu1", "gpu2"]
    assert topo.graph.get_edge_data(1, 0)[0]["bandwidth"] == 50e9


# ---- schedules.md -------------------------------------------------------------------------------

def test_schedule_keys_are_the_readers_keys(tmp_path):
    text = page("schedules.md")
    assert first_column(section(text, "The JSON object")) == set(schedule_file.JSON_KEYS)
    fields = first_column(section(text, "A send"))
    assert fields == {"chunk", "lo", "hi", "src", "dst", "step", "op"}
    assert set(re.findall(r'`"(\w+)"`', section(text, "A send"))) >= set(schedule_file.OP_CODES)
    with pytest.raises(InputError, match="unknown key"):
        schedule_file.from_json({"format": schedule_file.FORMAT, "collective": "allgather", "nodes": 2,
                                 "chunks": 2, "sends": [], "rouitng": "links"})


def test_schedule_example_verifies(tmp_path):
    sched, inst = example_files(page("schedules.md"), tmp_path)
    from collsynth.instances.instance import load_instance

    instance = load_instance(inst)
    assert verify(schedule_file.read_json(sched), instance) is None


# ---- results.md, cost-models.md, README ---------------------------------------------------------

def test_result_columns_are_the_schema():
    text = page("results.md")
    block = text.split("<!-- result-columns: generated by python -m collsynth.results.schema -->\n")[1]
    block = block.split("\n<!-- end result-columns -->")[0]
    assert block == schema.markdown(), "regenerate the table: python -m collsynth.results.schema"
    assert [r[0].strip("`") for r in table_rows(block)[1:]] == list(schema.COLUMNS)


def test_statuses_are_the_enum_s_documentation():
    from collsynth.tens import status

    block = page("results.md").split("<!-- statuses: generated by python -m collsynth.tens.status -->\n")[1]
    block = block.split("\n<!-- end statuses -->")[0]
    assert block == status.markdown(), "regenerate the table: python -m collsynth.tens.status"
    assert [r[0].strip("`") for r in table_rows(block)[1:]] == [s.value for s in status.Status]


def test_cost_models_are_documented():
    headings = re.findall(r"^## `([\w-]+)`", page("cost-models.md"), re.M)
    assert headings == list(cost_models.all_names())


def test_pages_are_linked_and_their_links_resolve():
    readme = (REPO / "README.md").read_text()
    for name in PAGES:
        assert f"(docs/{name})" in readme
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", page(name)):
            assert (DOCS / target).exists(), (name, target)
