"""The conformance page (index.html, attention_conformance/publish/page.py) in a real browser: Debian's chromium,
driven through Debian's chromium-driver by selenium, opening the file from file:// as a user would.

Three pages: one made here from two adapters run outside the checkout (the reference, and a copy that fails
its softmax cases, raises with HTML in its message and declares a known divergence with a link), one made
from the published run (a full run's 40 columns, which must all be in view at 1400 px), and the page the
main job wrote (reports/index.html; tox runs this environment after the summary). Each is checked against
the reports it was made from, filtered, and its cells opened. Without chromium every test fails
with the command that installs it: a browser check that skips would be a silent green.

    python tests/publish/test_page.py PAGE PNG [CASE COLUMN]   a screenshot of a page with a cell opened and
                                                       its framework's columns shown (docs/page.png)
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from attention_conformance import modes
from attention_conformance.contract import ids, registry
from attention_conformance.paths import PUBLISHED_DIR
from attention_conformance.publish import matrix
from attention_conformance.run import reports
from attention_conformance.tools import template

COMMAND = str(Path(sys.executable).parent / "attention-conformance")
INSTALL = "apt-get install chromium chromium-driver"  # Debian's packages; as root, or with sudo
LINK = "https://github.com/pytorch/pytorch/issues/41508"
HOSTILE = "</script><img id=injected src=x onerror=alert(1)> is text, never markup"
WRONG = f"""

def softmax(scores):  # a normalisation one part in 10^6 off: every softmax case fails
    (scores,) = _f64(scores)
    e = exp(scores - scores.max(axis=-1, keepdims=True))
    return e / fsum(e, axis=-1, keepdims=True) * (1 + 1e-6)


def scale(scores, d_k):
    raise ValueError({HOSTILE!r})


def masked_attention(x, w_query, w_key, w_value, mask):  # the textbook -inf mask: NaN on a row with every key hidden
    queries, keys, values = x @ w_query, x @ w_key, x @ w_value
    scores = np.where(mask, -np.inf, queries @ np.swapaxes(keys, -1, -2) / np.sqrt(keys.shape[-1]))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return {{"weights": weights, "context": weights @ values}}


KNOWN_DIVERGENCES = {{"padding_fully_masked": "the textbook -inf mask computes 0/0 ({LINK})"}}
"""


def chromium():
    """(browser, driver) paths, or the test fails saying how to install them."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (browser and driver):
        missing = " and ".join(n for n, found in (("chromium", browser), ("chromedriver", driver)) if not found)
        pytest.fail(
            f"{missing} not found on PATH: install Debian's with `{INSTALL}` (sudo where you are not root) and rerun; "
            "the page is only tested in a real browser",
            pytrace=False,
        )
    return browser, driver


def open_browser(browser, driver):
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))


@pytest.fixture(scope="module")
def browser():
    driver = open_browser(*chromium())
    yield driver
    driver.quit()


def _run(args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([COMMAND, *args], cwd=cwd, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A reports folder and its page, made outside the checkout: page_good conforms, page_wrong does not."""
    where = tmp_path_factory.mktemp("outside")
    reference = template.text("reference")
    (where / "page_good.py").write_text(reference)
    (where / "page_wrong.py").write_text(reference + WRONG)
    for name in ("page_good", "page_wrong"):
        _run(["run", "--adapter", name, "-q"], where)
    # A benchmark's report, as `tox -e benchmark` leaves it beside the runs: the one the docs' tables are made from.
    shutil.copy(
        Path(__file__).resolve().parent.parent.parent / "docs" / "results" / "benchmark.json", where / "reports"
    )
    done = _run(["summary", "--adapter", "page_good", "--adapter", "page_wrong"], where)
    assert done.returncode == 1 and "FAILED: page_wrong:" in done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    return where / "reports"


def _load(browser, page):
    browser.get(page.resolve().as_uri())
    assert browser.find_element("css selector", "body").get_attribute("data-ready") == "true", (
        f"{page}: the page's script did not finish: {browser.get_log('browser') if hasattr(browser, 'get_log') else ''}"
    )


def _rows(browser, selector):
    return browser.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' tbody tr')].map("
        "tr => [...tr.children].map(td => td.textContent))",
        selector,
    )


def _cells(browser):
    """{(case, column): (status, dimmed)} of every cell shown."""
    found = browser.execute_script(
        "return [...document.querySelectorAll('#matrix-table td.cell')].map(td => "
        "[td.parentNode.dataset.case, td.dataset.column, td.dataset.status, td.classList.contains('dim')])"
    )
    return {(case, column): (status, dim) for case, column, status, dim in found}


def _select(browser, name, value):
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", f"filter-{name}")).select_by_value(value)


def _open(browser, case, column):
    """Click a cell as a user would: the open panel closed first, the cell scrolled to the middle."""
    from selenium.webdriver.common.keys import Keys

    browser.find_element("css selector", "body").send_keys(Keys.ESCAPE)
    cell = browser.find_element("css selector", f'tr[data-case="{case}"] td[data-column="{column}"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", cell)
    cell.click()
    body = browser.find_element("id", "details")
    assert body.is_displayed()
    return body


def _counts(report):
    count = Counter(r["outcome"] for r in report["tests"].values())
    failed = count["failed"] + count["error"] + count["stale divergence"]
    return [str(report["expected"]), str(count["passed"]), str(failed)]


def _asked(column, names):
    """Whether a summary asked for `names` shows the column: an adapter's, or another mode of one (modes.py)."""
    return column in names or modes.split(column)[0] in names


def _agrees_with_reports(browser, folders, names=None):
    """The summary table's counts and every cell's status are those of the reports the page was made from
    (of the adapters in `names`, every mode of each: the ones its summary was asked for)."""
    found, _ = reports.merge(folders)
    found = {key: report for key, report in found.items() if names is None or _asked(report["adapter"], names)}
    header = browser.execute_script(
        "return [...document.querySelectorAll('#summary-table thead th')].map(th => th.textContent)"
    )
    where = [header.index(h) for h in ("tests", "passed", "failed")]
    shown = {row[0]: [row[i] for i in where] for row in _rows(browser, "#summary-table")}
    assert shown == {key: _counts(report) for key, report in found.items()}
    outline = next(iter(found.values()))["outline"]
    built = matrix.build(found, outline, [])
    expected = {(row["case"], c): cell["status"] for row in built["rows"] for c, cell in row["cells"].items()}
    assert {key: status for key, (status, _) in _cells(browser).items()} == expected
    assert browser.find_element("id", "shown").text.startswith(f"{len(outline['cases'])} of {len(outline['cases'])}")
    return found


def _fits(browser):
    """At 1400 px every column of the matrix is in view: no header past the window's right edge, nothing to scroll
    sideways (the torch and tfjs columns were cut off at the right)."""
    width, right, wrap, page = browser.execute_script(
        "const wrap = document.getElementById('matrix-wrap'), root = document.documentElement;"
        "return [root.clientWidth, Math.max(...[...document.querySelectorAll('#matrix-table thead th')]"
        ".map(th => th.getBoundingClientRect().right)), wrap.scrollWidth - wrap.clientWidth,"
        "root.scrollWidth - root.clientWidth]"
    )
    assert 1300 < width <= 1400, f"the window is {width} px wide, not 1400"
    assert right <= width and wrap == 0 and page == 0, (right, width, wrap, page)


def test_the_page_is_one_file_that_fetches_nothing(demo):
    html = (demo / "index.html").read_text()
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=|<link\b|url\(|@import", html, re.I)
    assert HOSTILE not in html, "a message's '<' must be escaped inside the page's JSON"


def test_the_page_agrees_with_its_reports_and_its_filters_narrow_it(browser, demo):
    _load(browser, demo / "index.html")
    found = _agrees_with_reports(browser, [demo])
    assert browser.find_element("id", "verdict").text.startswith("FAILED: page_wrong:")
    assert browser.find_element("id", "made").text.startswith("From the reports in reports/ (the last finished 20")
    marked = browser.execute_script(
        "return [...document.querySelectorAll('#summary-table tbody tr')].map(tr => [tr.cells[0].textContent, "
        "tr.cells[tr.cells.length - 1].className])"
    )
    assert marked == [["page_good", "status-ok"], ["page_wrong", "status-bad"]], marked
    failing = {ids.parse(t)[3] for t, r in found["page_wrong"]["tests"].items() if r["outcome"] in ("failed", "error")}
    assert {"thermostat", "thermostat_x8", "row_scale_binary"} <= failing

    _select(browser, "outcome", "failed")
    cells = _cells(browser)
    assert {case for case, _ in cells} == failing
    assert browser.find_element("id", "shown").text.startswith(f"{len(failing)} of ")
    assert all(dim == (status != "failed") for status, dim in cells.values())
    _select(browser, "framework", "page_good")
    assert _cells(browser) == {} and browser.find_element("id", "shown").text.startswith("0 of ")
    _select(browser, "framework", "")
    _select(browser, "outcome", "")
    search = browser.find_element("id", "search")
    search.send_keys("thermostat")
    assert {case for case, _ in _cells(browser)} == {"thermostat", "thermostat_x8", "thermostat_x2000"}
    search.clear()
    search.send_keys("issues/41508")  # a known divergence's link: the search reads reasons too
    assert {case for case, _ in _cells(browser)} == {"padding_fully_masked"}
    search.clear()


def test_a_cell_opens_its_tests_message_reason_and_link(browser, demo):
    _load(browser, demo / "index.html")
    found = json.loads((demo / "page_wrong.json").read_text())["tests"]

    failing = _open(browser, "thermostat", "page_wrong float64")
    message = failing.find_element("css selector", '.test[data-outcome="failed"] pre.message').text
    assert message == found["test_weights[page_wrong-float64-thermostat]"]["message"]
    assert "worst element [" in message and "expected value: golden doc000_thermostat.json#softmax_s" in message
    rerun = failing.find_element("css selector", '.test[data-outcome="failed"] .rerun').text
    assert rerun.endswith(
        'run --adapter page_wrong "attention_conformance/conformance.py::test_weights[page_wrong-float64-thermostat]"'
        " (its outcome goes on top of this complete run)"
    ), rerun

    raised = _open(browser, "row_scale_binary", "page_wrong float64")
    assert HOSTILE in raised.find_element("css selector", "pre.message").text
    assert browser.find_elements("id", "injected") == []

    diverged = _open(browser, "padding_fully_masked", "page_wrong float64")
    # A divergence with no kind on a case that states a convention reads as another convention (matrix.standing).
    test = diverged.find_element("css selector", '.test[data-outcome="other convention"]')
    assert "got nan" in test.find_element("css selector", "pre.message").text
    assert "the textbook -inf mask computes 0/0" in test.find_element("css selector", ".reason").text
    assert test.find_element("css selector", ".reason a").get_attribute("href") == LINK

    passed = _open(browser, "thermostat", "page_good float64")
    worst = passed.find_element("css selector", '.test[data-outcome="passed"] .worst').text
    assert re.fullmatch(
        r"worst element \[\d\]: got [\d.e-]+, expected [\d.e-]+; \|error\| [\d.e-]+ <= allowed [\d.e-]+ "
        r"from tolerance 'golden'; expected value: golden doc000_thermostat.json#softmax_s",
        worst,
    ), worst
    browser.save_screenshot(str(demo / "index.png"))

    benchmark = json.loads((demo / "benchmark.json").read_text())
    first = browser.execute_script(
        "return [...document.querySelectorAll('#benchmarks table:first-of-type tbody tr')]"
        ".map(tr => tr.cells[0].textContent)"
    )
    assert first == [row["adapter"] for row in benchmark["frameworks"]]

    from selenium.webdriver.common.keys import Keys

    browser.find_element("css selector", "body").send_keys(Keys.ESCAPE)
    assert not browser.find_element("id", "details").is_displayed()


def test_a_merged_page_has_a_column_per_machine(browser, demo, tmp_path):
    """Reports from two machines (here: two folders) merge into one page, each column naming where it ran."""
    for name in ("page_good", "page_wrong"):
        (tmp_path / name).mkdir()
        shutil.copy(demo / f"{name}.json", tmp_path / name)
    folders = [tmp_path / "page_good", tmp_path / "page_wrong"]
    done = _run(["summary", *(f"--reports={f}" for f in folders), "--html", "merged.html"], tmp_path)
    assert done.returncode == 1 and (tmp_path / "merged.html").is_file(), done.stderr[-2000:]
    _load(browser, tmp_path / "merged.html")
    found = _agrees_with_reports(browser, folders)
    groups = browser.execute_script(
        "return [...document.querySelectorAll('#matrix-table thead tr:first-child th')].map(th => th.textContent)"
    )
    assert groups == ["case", *sorted(found)] and all("cpu@" in g for g in groups[1:]), groups


def test_a_full_runs_page_shows_every_column_at_1400_px_and_a_click_opens_a_cell(browser, tmp_path):
    """The published run's page: twelve adapters, 40 columns of framework x dtype, each status its own mark."""
    done = _run(["summary", "--reports", str(PUBLISHED_DIR), "--out", "out"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    browser.set_window_size(1400, 900)
    _load(browser, tmp_path / "out" / "index.html")
    columns = browser.execute_script("return document.querySelectorAll('#matrix-table thead tr + tr th').length")
    assert columns >= 40, columns
    _fits(browser)
    assert browser.find_element("id", "made").text.startswith(f"From the reports in {PUBLISHED_DIR}/ (")
    marks = browser.execute_script(
        "return [...document.querySelectorAll('#legend .mark')].map(m => [m.textContent, m.style.background])"
    )
    assert len({text for text, _ in marks}) == len(marks) and len({bg for _, bg in marks}) == len(marks), marks
    # The last column (torch-compiled's bfloat16), at the right edge: a click opens its tests.
    last = browser.execute_script(
        "const cells = document.querySelectorAll('tr[data-case=\"sat\"] td.cell');"
        "return cells[cells.length - 1].dataset.column"
    )
    assert last.startswith("torch"), last
    opened = _open(browser, "sat", last)
    assert opened.find_element("css selector", "h3").text == f"sat / {last}"
    assert opened.find_elements("css selector", ".test"), "the cell's tests are listed"


def test_the_main_jobs_page_agrees_with_its_reports(browser):
    """reports/index.html as `tox -m conformance -p auto` (or `tox -p auto`) left it, beside its reports."""
    folder = Path(reports.DEFAULT_DIR)
    page = folder / "index.html"
    if not page.is_file():
        pytest.fail(
            f"no {page}: run the main job first (`tox -m conformance -p auto`; `tox -p auto` runs it before this)"
        )
    found = {name: r for name, r in reports.runs(folder).items() if _asked(name, registry.NAMES)}  # tox's summary's
    stale = [
        name for name, r in found.items() if (folder / reports.file_name(name)).stat().st_mtime > page.stat().st_mtime
    ]
    assert not stale, f"{page} is older than the reports of {', '.join(stale)}: rerun `tox -e summary`"
    assert page.stat().st_size <= 2 * 1024 * 1024, f"{page} is {page.stat().st_size} bytes; the page must stay <= 2 MB"
    _load(browser, page)
    _fits(browser)
    _agrees_with_reports(browser, [folder], registry.NAMES)
    diverged = [
        (ids.parse(t)[3], f"{ids.parse(t)[1]} {ids.parse(t)[2]}")
        for name, r in found.items()
        for t, result in r["tests"].items()
        if result["outcome"] == "diverged" and "https://" in (result["reason"] or "")
    ]
    assert diverged, "the main job declares known divergences with links: none found in its reports"
    case, column = diverged[0]
    opened = _open(browser, case, column)
    assert opened.find_element("css selector", ".reason a").get_attribute("href").startswith("https://")
    browser.save_screenshot(str(folder / "index.png"))


def screenshot(page, png, case=None, column=None):
    """A screenshot of `page` with a cell opened, its framework's columns alone, for the README."""
    driver = open_browser(*chromium())
    try:
        _load(driver, Path(page))
        if case:
            _select(driver, "framework", column.split()[0])  # its framework's columns, clear of the details panel
            _open(driver, case, column)
            # The matrix's heading and filters at the top of the window, the opened cell in the middle of the matrix.
            driver.execute_script(
                "const cell = document.querySelector('td.cell.open'), wrap = document.getElementById('matrix-wrap');"
                "wrap.scrollTop = cell.offsetTop - wrap.clientHeight / 2;"
                "document.getElementById('filters').parentNode.scrollIntoView();"
            )
            time.sleep(0.5)  # the scrolled frame painted before the picture is taken
        driver.save_screenshot(str(png))
    finally:
        driver.quit()


if __name__ == "__main__":
    screenshot(*sys.argv[1:])
