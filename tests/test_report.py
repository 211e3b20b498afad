"""`collsynth report`: a static HTML site from the committed quick-suite store, checked file by
file and in a real headless browser (Debian's Chromium through selenium)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pandas as pd
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from collsynth.tens.status import Status
from collsynth.results import report
from collsynth.solvers.cli import main
from builders import QUICK_STORE, stored as _stored

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    assert main(["report", "--store", str(QUICK_STORE), "--out", str(out), "--jobs", "2", "--no-progress"]) == 0
    return out


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links += [attrs[k] for k in ("href", "src") if attrs.get(k)]
        if attrs.get("id"):
            self.ids.add(attrs["id"])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text())
    return parser


def test_every_instance_has_a_page_listing_every_run(site, capsys):
    per_instance = dict(_stored("SELECT instance, COUNT(*) FROM runs GROUP BY instance"))
    pages = {p.stem: p for p in (site / "instances").glob("*.html")}
    assert set(pages) == {report.slug(n) for n in per_instance}
    for name, runs in per_instance.items():
        html = pages[report.slug(name)].read_text()
        body = html.split('id="runs"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
        assert body.count("<tr>") == runs, name  # one row per stored run
    index = (site / "index.html").read_text()
    assert all(f'href="instances/{report.slug(n)}.html"' in index for n in per_instance)


def test_every_local_link_resolves(site, capsys):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) == 1 + len(_stored("SELECT DISTINCT instance FROM runs"))
    checked = 0
    for page in pages:
        parsed = _parse(page)
        for link in parsed.links:
            parts = urlsplit(link)
            assert parts.scheme in ("", "file"), f"{page.name}: {link} leaves the report (it must work offline)"
            if parts.path:
                target = (page.parent / unquote(parts.path)).resolve()
                assert target.is_file(), f"{page.relative_to(site)}: {link} does not resolve"
                checked += 1
            if parts.fragment:
                ids = _parse(target).ids if parts.path else parsed.ids
                assert parts.fragment in ids, f"{page.name}: {link} names no element"
    verified_with_schedule = _stored("SELECT COUNT(*) FROM runs WHERE verified = 1 AND schedule_path != ''")[0][0]
    assert checked > 2 * len(pages) + verified_with_schedule  # css, js, pictures, schedules all linked


def test_report_of_a_missing_store_is_one_line_exit_2(tmp_path, capsys):
    assert main(["report", "--store", str(tmp_path / "missing"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and not (tmp_path / "r").exists()


def test_optimality_table_marks_the_best_ratio_per_instance():
    runs = pd.DataFrame({
        "instance": ["a", "a", "b", "b"], "producer": ["x", "y", "x", "y"], "solver": "", "driver": "",
        "suite": "s", "verified": [True, True, True, False], "time_sync_s": [3.0, 2.0, 4.0, None],
        "lower_bound_s": [2.0, 2.0, 4.0, 4.0], "steps": [1, 1, 1, None], "lower_bound_steps": 1,
    })
    t = report.optimality_table(runs)
    titles = [c["title"] for c in t["columns"]]
    rows = {r[0]["text"]: {title: c for title, c in zip(titles, r)} for r in t["rows"]}
    # hand-computed: a -> x 3/2, y 2/2 (best); b -> x 4/4 (best), y has no verified schedule
    assert (rows["a"]["x"]["text"], rows["a"]["y"]["text"], rows["a"]["best / bound"]["text"]) == ("1.500", "1.000", "1.000")
    assert "best" in rows["a"]["y"]["cls"] and "best" not in rows["a"]["x"]["cls"]
    assert (rows["b"]["x"]["text"], rows["b"]["y"]["text"], rows["b"]["y"]["sort"]) == ("1.000", "—", "")
    assert rows["a"]["instance"]["href"] == "instances/a.html"


# ---- in a real browser --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("no headless browser: install Debian's chromium and chromium-driver "
                    "(apt-get install -y chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in BROWSER_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="collsynth-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _open(browser, path: Path) -> None:
    browser.get(path.resolve().as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert not errors, f"{path.name}: {errors}"


def _column(browser, table_id: str, title: str) -> tuple[list[str], list[str]]:
    """(instance names, this column's sort keys) of the table's visible rows, in page order."""
    return browser.execute_script("""
        const [id, title] = arguments;
        const table = document.getElementById(id);
        const col = Array.from(table.tHead.rows[0].cells).findIndex(th => th.textContent.trim() === title);
        const shown = Array.from(table.tBodies[0].rows).filter(r => r.getClientRects().length > 0);
        return [shown.map(r => r.cells[0].textContent.trim()), shown.map(r => r.cells[col].dataset.sort)];
    """, table_id, title)


def _click_header(browser, table_id: str, title: str) -> None:
    browser.find_element(By.XPATH, f'//table[@id="{table_id}"]/thead//th[normalize-space()="{title}"]').click()


def _numbers_then_blanks(keys: list[str], descending: bool) -> list[str]:
    filled = sorted((k for k in keys if k), key=float, reverse=descending)
    return filled + [k for k in keys if not k]


def test_pages_load_without_console_errors_and_show_their_pictures(site, browser):
    for page in [site / "index.html", *sorted((site / "instances").glob("*.html"))]:
        _open(browser, page)
        broken = browser.execute_script(
            "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
        assert not broken, f"{page.name}: pictures that do not load: {broken}"
        assert browser.find_elements(By.CSS_SELECTOR, "table.sortable")


def test_a_header_click_sorts_the_table(site, browser):
    _open(browser, site / "index.html")
    names, keys = _column(browser, "optimality", "best / bound")
    pairs = dict(zip(names, keys))
    _click_header(browser, "optimality", "best / bound")
    up_names, up_keys = _column(browser, "optimality", "best / bound")
    assert up_keys == _numbers_then_blanks(keys, descending=False) and up_keys != keys
    assert dict(zip(up_names, up_keys)) == pairs  # rows move whole
    _click_header(browser, "optimality", "best / bound")
    assert _column(browser, "optimality", "best / bound")[1] == _numbers_then_blanks(keys, descending=True)
    _click_header(browser, "optimality", "instance")
    _click_header(browser, "optimality", "instance")  # second click: descending
    stored = sorted(n for (n,) in _stored("SELECT DISTINCT instance FROM runs"))
    assert _column(browser, "optimality", "instance")[0] == stored[::-1]


def test_the_filter_hides_rows_that_do_not_match(site, browser):
    _open(browser, site / "index.html")
    box = browser.find_element(By.CSS_SELECTOR, 'input.filter[data-table="steps"]')
    box.send_keys("torus allgather")
    stored = sorted(n for (n,) in _stored("SELECT DISTINCT instance FROM runs"))
    expected = [n for n in stored if "torus" in n and "allgather" in n]
    assert 0 < len(expected) < len(stored)
    assert _column(browser, "steps", "instance")[0] == expected
    count = browser.find_element(By.ID, "steps-count").text
    assert count == f"{len(expected)} of {len(stored)} rows"
    box.clear()
    box.send_keys(" ")  # an input event with no words: every row again
    assert len(_column(browser, "steps", "instance")[0]) == len(stored)


def test_a_store_whose_instance_file_is_gone_still_reports(tmp_path, capsys):
    st = tmp_path / "store"
    shutil.copytree(QUICK_STORE, st)
    con = sqlite3.connect(st / "runs.sqlite")
    con.execute("DELETE FROM runs WHERE instance != 'ring8-allgather'")
    con.execute("UPDATE runs SET instance_file = '/nowhere/ring8-moved.toml'")
    con.commit()
    con.close()
    assert main(["report", "--store", str(st), "--out", str(tmp_path / "r"), "--jobs", "1", "--no-progress"]) == 0
    page = (tmp_path / "r" / "instances" / "ring8-allgather.html").read_text()
    assert "Instance file not found (/nowhere/ring8-moved.toml)" in page
    assert page.count("<img") == 0 and "<h2>Runs</h2>" in page


def test_the_index_has_a_status_legend_of_every_stored_status(site, browser):
    """In the browser: the legend section lists each status the store's rows have under the
    proof rule (read straight from the database), in the enum's order, each with a meaning, and the table of contents links to it."""
    _open(browser, site / "index.html")
    legend = browser.find_element(By.ID, "status-legend")
    assert legend.is_displayed()
    terms = [e.text.strip() for e in legend.find_elements(By.TAG_NAME, "dt")]
    meanings = [e.text.strip() for e in legend.find_elements(By.TAG_NAME, "dd")]
    stored = {Status.of_row(s, b).value for (s, b) in _stored("SELECT status, bound_source FROM runs")}
    assert set(terms) == stored and terms == [s.value for s in Status if s.value in stored]
    assert len(meanings) == len(terms) and all(m and m != "(not documented)" for m in meanings)
    assert "optimal" in terms and "lower bound" in meanings[terms.index("optimal")]
    browser.find_element(By.CSS_SELECTOR, 'nav.toc a[href="#status-legend"]').click()
