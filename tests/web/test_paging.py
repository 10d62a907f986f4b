"""``/api/status`` and ``/api/volumes`` answer a page (``page``, ``limit``), worst first, with
the whole answer's count in ``X-Total-Count`` and the neighbouring pages in ``Link``;
``pipeledger status --page --limit`` answers the same page, and its ``--fail-on`` still
judges every pipeline."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from html import unescape
from typing import Any
from urllib.parse import quote

import pytest

from pipeledger import api
from tests.web import known as k
from tests.web.conftest import get
from tests.web.test_json_twins import settled


def fetch(url: str) -> tuple[int, dict[str, str], Any]:
    """Status, headers and JSON body of a GET (an error status too)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, lower(response.headers.items()), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, lower(exc.headers.items()), json.loads(exc.read())


def lower(headers: Any) -> dict[str, str]:
    """Headers by their names in lower case (HTTP's names know no case)."""
    return {name.lower(): value for name, value in headers}


def links(header: str) -> dict[str, str]:
    """``Link``'s targets by relation."""
    return {rel: url for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', header)}


def same(served: Any, printed: Any) -> bool:
    """The same document but for the values computed from the moment of asking."""
    return bool(settled(served, printed) == settled(printed, served))


def whole_status(known: k.Known) -> list[dict[str, Any]]:
    return known.project.run_json("status")


def test_status_is_worst_first(known_project: k.Known) -> None:
    whole = whole_status(known_project)
    found = [(s["health"], s["pipeline"]) for s in whole]
    assert found == sorted(found, key=lambda hs: api.worst_first(*hs))
    assert found[0][0] == "CRITICAL" and found[-1][0] == "HEALTHY"
    for health, name in found:
        assert k.HEALTH.get(name, health) == health, name


def test_each_page_of_api_status_is_its_slice_of_the_whole(
    known_project: k.Known, dashboard: str
) -> None:
    whole = whole_status(known_project)
    assert len(whole) >= 5
    pages = -(-len(whole) // 2)
    for number in range(1, pages + 1):
        status, headers, body = fetch(dashboard + f"/api/status?limit=2&page={number}")
        assert status == 200
        assert same(body, whole[2 * (number - 1) : 2 * number])
        assert headers["x-total-count"] == str(len(whole))
        rel = links(headers["link"])
        assert rel["first"] == "/api/status?page=1&limit=2"
        assert rel["last"] == f"/api/status?page={pages}&limit=2"
        assert rel.get("next") == (
            f"/api/status?page={number + 1}&limit=2" if number < pages else None
        )
        assert rel.get("prev") == (f"/api/status?page={number - 1}&limit=2" if number > 1 else None)
    status, headers, body = fetch(dashboard + f"/api/status?limit=2&page={pages + 1}")
    assert status == 200 and body == [] and headers["x-total-count"] == str(len(whole))
    status, headers, body = fetch(dashboard + "/api/status")  # the default page holds them all
    assert same(body, whole) and "next" not in links(headers["link"])


def test_the_cli_pages_as_the_api_does(known_project: k.Known, dashboard: str) -> None:
    whole = whole_status(known_project)
    assert same(known_project.project.run_json("status", "--limit", "2", "--page", "2"), whole[2:4])
    assert same(fetch(dashboard + "/api/status?limit=2&page=2")[2], whole[2:4])
    assert same(known_project.project.run_json("status", "--limit", "3"), whole[:3])
    code, out, _ = known_project.project.cli("status", "--limit", "2", "--page", "2")
    assert code == 0
    names = [s["pipeline"] for s in whole]
    assert names[2] in out and names[0] not in out.split("\n", 1)[0]
    assert f"pipelines 3-4 of {len(whole)} (page 2; --page 3 for the next)" in out
    code, out, _ = known_project.project.cli("status", "--page", "9")
    assert code == 0 and f"page 9 is past the last (1 of {len(whole)} pipelines)" in out


def test_fail_on_judges_every_pipeline_not_only_the_page(known_project: k.Known) -> None:
    whole = whole_status(known_project)
    critical = [s["pipeline"] for s in whole if s["health"] == "CRITICAL"]
    last = str(len(whole))  # worst first: the last page holds a HEALTHY pipeline
    assert whole[-1]["health"] == "HEALTHY"
    code, out, err = known_project.project.cli(
        "status", "--limit", "1", "--page", last, "--json", "--fail-on", "critical"
    )
    assert code == 1 and same(json.loads(out), whole[-1:])
    assert f"{len(critical)} pipeline(s) at or above CRITICAL" in err
    for name in critical:
        assert name.split("<")[0] in err


@pytest.mark.parametrize(
    ("query", "word"),
    [("limit=0", "limit"), ("limit=1001", "limit"), ("limit=x", "limit"), ("page=0", "page")],
)
def test_a_page_it_cannot_take_is_a_bad_request(
    known_sqlite: k.Known, sqlite_dashboard: str, query: str, word: str
) -> None:
    for path in ("/api/status", "/api/volumes"):
        status, _, body = fetch(sqlite_dashboard + f"{path}?{query}")
        assert status == 400 and body["error"].startswith(word), body
    option, value = query.split("=")
    code, _, err = known_sqlite.project.cli("status", f"--{option}", value)
    assert code != 0 and word in err


def test_api_volumes_pages_the_pipelines_as_api_status_does(
    known_project: k.Known, dashboard: str
) -> None:
    whole = whole_status(known_project)
    every = fetch(dashboard + f"/api/volumes?limit={api.PAGE_MAX}")[2]
    assert {d["pipeline"] for d in every} <= {s["pipeline"] for s in whole}
    assert every != []
    for number in (1, 2):
        status, headers, body = fetch(dashboard + f"/api/volumes?limit=2&page={number}")
        names = [s["pipeline"] for s in whole[2 * (number - 1) : 2 * number]]
        assert status == 200 and headers["x-total-count"] == str(len(whole))
        assert body == [d for n in names for d in every if d["pipeline"] == n]
    name = next(d["pipeline"] for d in every)
    status, headers, body = fetch(dashboard + f"/api/volumes?name={quote(name)}")
    assert headers["x-total-count"] == "1" and body == [d for d in every if d["pipeline"] == name]


def test_the_overview_lists_the_ledger_s_pipelines_in_the_status_order(
    known_sqlite: k.Known, sqlite_dashboard: str
) -> None:
    whole = [s["pipeline"] for s in whole_status(known_sqlite)]
    status, body = get(sqlite_dashboard + "/")
    assert status == 200
    shown = [unescape(n) for n in re.findall(r'<tr data-node="([^"]+)"', body)]
    assert [n for n in shown if n in whole] == whole
