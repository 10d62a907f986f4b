"""The overview at hundreds of nodes: every node counted in the health tiles, a page of
them drawn, worst first, with a filter by health word and by name, all in the URL."""

from __future__ import annotations

import re

import pytest

from tests.web import known as k
from tests.web.conftest import get


def nodes(body: str) -> list[str]:
    return re.findall(r'<tr data-node="([^"]+)"', body)


def tiles(body: str) -> dict[str, str]:
    counts = re.search(r'<div class="summary" id="health-counts">(.*?)</div>\n</div>', body, re.S)
    assert counts is not None
    return dict(re.findall(r'data-health="(\w+)"><div class="n">(\d+)</div>', counts.group(1)))


def test_a_page_of_the_nodes_worst_first_with_the_whole_counts(
    known_sqlite: k.Known, sqlite_dashboard: str
) -> None:
    status, whole = get(sqlite_dashboard + "/")
    assert status == 200
    everyone = nodes(whole)
    assert len(everyone) >= 4
    status, first = get(sqlite_dashboard + "/?limit=2")
    assert status == 200 and nodes(first) == everyone[:2]
    assert tiles(first) == tiles(whole)  # the tiles count every node, not the page's
    assert 'id="older-nodes" href="/?page=2&amp;limit=2"' in first
    assert 'id="newer-nodes"' not in first
    status, second = get(sqlite_dashboard + "/?page=2&limit=2")
    assert nodes(second) == everyone[2:4] and 'id="newer-nodes" href="/?limit=2"' in second
    assert f"3-4 of {len(everyone)}" in second


def test_the_filter_keeps_a_health_word_or_part_of_a_name(
    known_sqlite: k.Known, sqlite_dashboard: str
) -> None:
    status, whole = get(sqlite_dashboard + "/")
    counts = tiles(whole)
    for word, n in counts.items():
        status, body = get(sqlite_dashboard + f"/?health={word.lower()}")
        assert status == 200 and len(nodes(body)) == int(n), word
        assert f'<option value="{word}" selected>' in body
    status, body = get(sqlite_dashboard + "/?q=PAY")
    assert nodes(body) == [n for n in nodes(whole) if "pay" in n.lower()] != []
    status, body = get(sqlite_dashboard + "/?q=no-such-node")
    assert nodes(body) == [] and "no node matches the filter" in body


@pytest.mark.parametrize("query", ["health=SO-SO", "page=0", "page=x", "limit=5000"])
def test_a_filter_it_cannot_take_is_a_bad_request(
    known_sqlite: k.Known, sqlite_dashboard: str, query: str
) -> None:
    status, body = get(sqlite_dashboard + "/?" + query)
    assert status == 400, body


def reliability_nodes(body: str) -> list[str]:
    table = body.split('<table id="reliability">', 1)[1].split("</table>", 1)[0]
    from urllib.parse import unquote

    return [unquote(n) for n in re.findall(r'<tr><td><a href="/node/([^"]+)">', table)]


def test_the_alerts_page_shows_the_least_reliable_nodes_and_the_newest_alerts(
    known_sqlite: k.Known, sqlite_dashboard: str
) -> None:
    import json

    report = json.loads(known_sqlite.project.cli("sla", "--json")[1])
    short = {r["pipeline"]: r for r in report["reliability"] if r["days"] == 7}
    failing = sorted(p for p, r in short.items() if r["failing_since"])
    status, whole = get(sqlite_dashboard + "/alerts")
    assert status == 200
    names = list(dict.fromkeys(reliability_nodes(whole)))
    assert sorted(names) == sorted(short) and len(reliability_nodes(whole)) == 2 * len(short)
    assert names[: len(failing)] == failing  # still failing first
    rates = [short[n]["success_rate"] for n in names[len(failing) :]]
    assert rates == sorted(rates, key=lambda r: 2.0 if r is None else r)
    status, one = get(sqlite_dashboard + "/alerts?limit=1")
    assert status == 200 and reliability_nodes(one) == [names[0], names[0]]
    assert f"the 1 of {len(short)} nodes" in one
    alerts = json.loads(known_sqlite.project.cli("alerts", "--json")[1])
    assert f'<div class="n">{len(alerts)}</div><div class="muted">alerts in 7 days' in one
    assert one.split('<table id="alerts">', 1)[1].split("</table>")[0].count("<tr><td") == 1
    assert get(sqlite_dashboard + "/alerts?limit=0")[0] == 400
