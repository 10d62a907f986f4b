"""The dashboard in a real browser (headless Chromium from the OS, driven by Playwright)
over the known ledger of :mod:`tests.web.known`: what the on-call engineer reads, where
they click, and what a reload keeps."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.web import known as k

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs"
SHOTS = ("overview.png", "node.png", "failed-run.png")


@pytest.fixture
def shots(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Where screenshots go: docs/ with ``--update-screenshots``, else the test's folder."""
    return DOCS if request.config.getoption("--update-screenshots") else tmp_path


@pytest.fixture
def page(browser: Any, sqlite_dashboard: str) -> Iterator[Any]:
    """A fresh tab; any JavaScript dialog (an injected alert()) fails the test."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    tab = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    tab.set_default_timeout(20_000)
    tab.base = sqlite_dashboard
    yield tab
    context.close()
    assert dialogs == [], f"a script ran in the page: {dialogs}"


def row(page: Any, name: str) -> Any:
    return page.locator(f"#nodes tr[data-node={json_attr(name)}]")


def json_attr(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_the_overview_shows_each_nodes_health_rate_and_last_failure(page: Any) -> None:
    page.goto(page.base + "/")
    for name, word in k.HEALTH.items():
        assert row(page, name).locator(".badge").inner_text() == word, name
    for name, rate in k.RATES.items():
        assert row(page, name).locator("td.rate").inner_text().startswith(rate), name
    counts = {
        word: sum(1 for w in k.HEALTH.values() if w == word) for word in set(k.HEALTH.values())
    }
    for word, n in counts.items():
        assert page.locator(f'#health-counts [data-health="{word}"] .n').inner_text() == str(n)
    failure = row(page, "payments").locator(".failure").inner_text()
    assert "quality gate failed" in failure and "nothing was published" in failure
    assert "ran past its timeout" in row(page, "customers").locator(".failure").inner_text()
    # the model downstream of a failing load is named beside it; the quarantine is counted
    assert row(page, "orders").locator("td").nth(6).inner_text() == "1"
    assert "never ran" in row(page, "refunds").inner_text()
    legend = page.locator("#work-legend").inner_text()
    for state in ("success", "partial", "failed", "timed_out", "abandoned", "cancelled"):
        assert state in legend


def test_names_and_errors_with_html_show_as_text(page: Any) -> None:
    page.goto(page.base + "/")
    script = row(page, k.SCRIPT_NAME)
    assert script.locator("a b").inner_text() == k.SCRIPT_NAME
    assert script.locator(".failure").inner_text() == k.HTML_ERROR
    script.locator("a b").click()
    assert page.locator("#node-name").inner_text() == k.SCRIPT_NAME
    page.locator("table.runs a.mono, table.runs td.mono a").first.click()
    assert page.locator("#run-error").inner_text() == k.HTML_ERROR
    assert page.locator("img").count() == 0


def test_the_node_pages_filters_are_in_the_url_and_survive_a_reload(page: Any) -> None:
    page.goto(page.base + "/node/payments")
    assert page.locator("table.runs tbody tr").count() == 3
    assert page.locator("#run-count").inner_text() == "3 run(s) match"
    page.select_option("#filters select[name=status]", "failed")
    page.click("#filters button")
    page.wait_for_url(re.compile(r"status=failed"))
    for _ in range(2):  # as filtered, then after a reload
        statuses = page.locator("table.runs tbody tr td:nth-child(2)").all_inner_texts()
        assert statuses == ["failed", "failed"]
        assert page.locator("#filters select[name=status]").input_value() == "failed"
        page.reload()
    page.select_option("#filters select[name=trigger]", "retry")
    page.click("#filters button")
    page.wait_for_url(re.compile(r"status=failed&trigger=retry"))
    assert page.locator("table.runs tbody tr").count() == 1


def test_the_node_pages_pages_go_back_in_time(page: Any) -> None:
    page.goto(page.base + "/node/events?limit=4")
    first = page.locator("table.runs tbody tr td:first-child").all_inner_texts()
    page.click("#older")
    second = page.locator("table.runs tbody tr td:first-child").all_inner_texts()
    assert len(first) == len(second) == 4 and not set(first) & set(second)
    assert page.locator("#run-count").inner_text() == "11 run(s) match"


def test_the_failed_runs_page_shows_the_failed_check_observed_against_expected(
    page: Any, known_sqlite: k.Known, shots: Path
) -> None:
    page.goto(page.base + "/run/" + known_sqlite.runs["payments failed"])
    check = page.locator('#checks tr[data-check="row_count"]')
    assert check.locator("td").nth(1).inner_text() == "fail"
    # the four new rows, and the one at the watermark (its closed lower bound re-reads it)
    assert check.locator(".observed").inner_text() == "5 rows"
    assert check.locator(".expected").inner_text() == "0..3"
    assert "quality gate failed" in page.locator("#run-error").inner_text()
    assert "nothing was written" in page.locator("#run-note").inner_text()
    attempts = page.locator("table.runs").first.locator("tbody tr")
    assert attempts.count() == 2  # the retry is attempt 2 of the same logical run
    take(page, shots, "failed-run.png")


def test_the_partial_runs_page_shows_the_quarantined_rows_and_how_to_replay(
    page: Any, known_sqlite: k.Known
) -> None:
    run_id = known_sqlite.runs["orders partial"]
    page.goto(page.base + "/run/" + run_id)
    check = page.locator('#checks tr[data-check="accepted_values:status"]')
    assert check.locator("td").nth(1).inner_text() == "fail"
    assert check.locator(".observed").inner_text() == "1 failing row(s)"
    assert "completed" in check.locator(".expected").inner_text()
    rows = page.locator("#quarantined tbody tr")
    assert rows.count() == 1
    assert rows.first.locator("td").first.inner_text() == "order_id=5"
    assert "bogus" in rows.first.inner_text()
    replay = f"pipeledger quarantine replay orders --run {run_id}"
    assert page.locator("#replay").inner_text() == replay
    siblings = page.locator("table.runs").nth(1).inner_text()  # its DAG run
    assert "order_totals" in siblings and "orders" in siblings


def test_the_dag_links_each_node_to_its_page(page: Any) -> None:
    page.goto(page.base + "/dag")
    node = page.locator(f'#dag a[href="/node/{quote("order_totals")}"]')
    assert "success" in (node.text_content() or "")
    node.click()
    page.wait_for_url(re.compile(r"/node/order_totals$"))
    assert page.locator("#node-name").inner_text() == "order_totals"
    assert "orders" in page.locator("dl.facts").first.inner_text()  # its upstream


def test_screenshots_of_the_main_pages(page: Any, shots: Path) -> None:
    page.goto(page.base + "/")
    take(page, shots, "overview.png")
    page.goto(page.base + "/node/payments")
    take(page, shots, "node.png")
    assert all((DOCS / name).exists() for name in SHOTS)
    readme = (DOCS.parent / "README.md").read_text()
    assert all(f"docs/{name}" in readme for name in SHOTS)


def take(page: Any, folder: Path, name: str) -> None:
    """A full-page screenshot (taken either way: a page that cannot be drawn fails here)."""
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)
    assert (folder / name).stat().st_size > 10_000
