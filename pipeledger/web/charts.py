"""Charts as SVG, drawn on the server: no script, nothing fetched, every text escaped.

Each function returns the markup of one ``<svg>`` element (a ``Markup``: the templates
put it in as it is, so nothing in it may come unescaped from the ledger). Colours are
per run state (:data:`STATE_COLOURS`); a state this module does not know (one a later
release adds) gets a grey of its own, so a chart never fails on new data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from markupsafe import Markup

STATE_COLOURS = {
    "success": "#2f9e44",
    "partial": "#f08c00",
    "failed": "#e03131",
    "timed_out": "#a61e4d",
    "abandoned": "#862e9c",
    "cancelled": "#868e96",
    "skipped": "#ced4da",
    "running": "#1c7ed6",
    "queued": "#74c0fc",
    "rejected": "#5c940d",  # refused, not failed: apart from the reds
}
# the order states are stacked and listed in; others follow, by name
STATE_ORDER = ("running", "success", "partial", "failed", "timed_out", "abandoned", "cancelled")
NO_RUN = "#dee2e6"
BAND = "#d0ebff"
LINE = "#1971c2"


def colour(state: str | None) -> str:
    """The colour of a run state (a grey from its name for a state not listed)."""
    if state is None:
        return NO_RUN
    known = STATE_COLOURS.get(state)
    if known is not None:
        return known
    shade = 90 + int(hashlib.sha1(state.encode()).hexdigest()[:2], 16) % 90
    return f"rgb({shade},{shade},{shade + 20})"


def states_in_order(states: Sequence[str]) -> list[str]:
    """``states`` (each once) in :data:`STATE_ORDER`, the unknown ones after, by name."""
    known = [s for s in STATE_ORDER if s in states]
    return known + sorted(set(states) - set(known))


def node_href(name: str) -> str:
    return "/node/" + quote(name, safe="")


def run_href(run_id: str) -> str:
    return "/run/" + quote(run_id, safe="")


def _svg(width: float, height: float, label: str, body: list[str]) -> Markup:
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>{''.join(body)}</svg>"
    )


def _scale(low: float, high: float, top: float, bottom: float) -> tuple[float, float]:
    """(factor, offset) mapping values in [low, high] to y in [bottom, top]."""
    spread = (high - low) or 1.0
    factor = (bottom - top) / spread
    return factor, bottom + low * factor


@dataclass(frozen=True)
class Band:
    """Where a value is expected: ``low`` .. ``high`` around ``mean``."""

    low: float
    high: float
    mean: float


def sparkline(
    values: Sequence[float | None],
    band: Band | None,
    label: str,
    latest: float | None = None,
    width: int = 180,
    height: int = 36,
) -> Markup:
    """A line of ``values`` (None: a gap), the ``band`` behind it, ``latest`` as a dot at
    the right end (red when outside the band)."""
    known = [v for v in values if v is not None]
    extra = [latest] if latest is not None else []
    bounds = known + extra + ([band.low, band.high] if band else [])
    if not bounds:
        return _svg(width, height, label, [_empty_text(width, height, "no intervals yet")])
    # the data's own range (not from 0): a steady volume that moves by a few percent shows
    low, high = min(bounds), max(bounds)
    if high - low < 1e-9:
        low, high = low - 1, high + 1
    factor, offset = _scale(low, high, 3, height - 3)
    step = (width - 10) / max(len(values) - 1, 1)
    body: list[str] = []
    if band is not None:
        top, bottom = offset - band.high * factor, offset - band.low * factor
        body.append(
            f'<rect x="0" y="{top:.1f}" width="{width}" height="{max(bottom - top, 1):.1f}" '
            f'fill="{BAND}"/>'
        )
    points = [
        f"{i * step:.1f},{offset - v * factor:.1f}" for i, v in enumerate(values) if v is not None
    ]
    if points:
        body.append(
            f'<polyline points="{" ".join(points)}" fill="none" stroke="{LINE}" '
            'stroke-width="1.5"/>'
        )
    if latest is not None:
        outside = band is not None and not band.low <= latest <= band.high
        body.append(
            f'<circle cx="{width - 4}" cy="{offset - latest * factor:.1f}" r="3" '
            f'fill="{"#e03131" if outside else LINE}"/>'
        )
    return _svg(width, height, label, body)


def _empty_text(width: float, height: float, text: str) -> str:
    return (
        f'<text x="{width / 2:.0f}" y="{height / 2 + 4:.0f}" text-anchor="middle" '
        f'font-size="11" fill="#868e96">{escape(text)}</text>'
    )


@dataclass(frozen=True)
class Bar:
    """One bar: a run's value, its state (the colour), a link and what hovering says."""

    value: float
    state: str
    href: str
    title: str


def bars(
    items: Sequence[Bar], label: str, band: Band | None = None, width: int = 640, height: int = 120
) -> Markup:
    """Bars oldest to newest, each a link, over the ``band`` (when given)."""
    if not items:
        return _svg(width, height, label, [_empty_text(width, height, "no runs")])
    top = max([b.value for b in items] + ([band.high] if band else [])) or 1.0
    factor, offset = _scale(0, top, 6, height - 14)
    body: list[str] = []
    if band is not None:
        y1, y2 = offset - band.high * factor, offset - band.low * factor
        body.append(
            f'<rect x="0" y="{y1:.1f}" width="{width}" height="{max(y2 - y1, 1):.1f}" '
            f'fill="{BAND}"/>'
            f'<line x1="0" x2="{width}" y1="{offset - band.mean * factor:.1f}" '
            f'y2="{offset - band.mean * factor:.1f}" stroke="{LINE}" stroke-dasharray="4 3"/>'
        )
    slot = width / len(items)
    bar = max(min(slot * 0.7, 36.0), 1.0)
    for i, b in enumerate(items):
        y = offset - b.value * factor
        body.append(
            f'<a href="{escape(b.href)}"><rect x="{i * slot + (slot - bar) / 2:.1f}" '
            f'y="{y:.1f}" width="{bar:.1f}" height="{max(offset - y, 1):.1f}" '
            f'fill="{colour(b.state)}"><title>{escape(b.title)}</title></rect></a>'
        )
    body.append(
        f'<text x="0" y="{height - 2}" font-size="10" fill="#868e96">0</text>'
        f'<text x="{width}" y="10" font-size="10" fill="#868e96" text-anchor="end">'
        f"{escape(f'{top:,.0f}')}</text>"
    )
    return _svg(width, height, label, body)


def state_strip(
    hours: Sequence[str],
    counts: Mapping[str, Mapping[str, int]],
    label: str,
    width: int = 720,
    height: int = 70,
) -> Markup:
    """Stacked bars of runs per hour (``counts[hour][state]``), the states stacked in
    :func:`states_in_order`."""
    states = states_in_order([s for per in counts.values() for s in per])
    most = max((sum(per.values()) for per in counts.values()), default=0) or 1
    slot = width / max(len(hours), 1)
    chart = height - 14
    body: list[str] = []
    for i, hour in enumerate(hours):
        per = counts.get(hour, {})
        y = float(chart)
        for state in states:
            n = per.get(state, 0)
            if not n:
                continue
            h = chart * n / most
            y -= h
            body.append(
                f'<rect x="{i * slot + 1:.1f}" y="{y:.1f}" width="{max(slot - 2, 1):.1f}" '
                f'height="{h:.1f}" fill="{colour(state)}"><title>{escape(hour)}:00 UTC '
                f"{escape(state)} {n}</title></rect>"
            )
        if i % 6 == 0:
            body.append(
                f'<text x="{i * slot:.1f}" y="{height - 2}" font-size="10" fill="#868e96">'
                f"{escape(hour[-2:])}h</text>"
            )
    return _svg(width, height, label, body)


@dataclass(frozen=True)
class Span:
    """One task on the timeline: seconds after the run started."""

    name: str
    start: float
    end: float
    state: str
    title: str


def timeline(spans: Sequence[Span], label: str, width: int = 720) -> Markup:
    """The tasks of a run as horizontal bars along the run's time."""
    row = 22
    height = row * max(len(spans), 1) + 18
    if not spans:
        return _svg(width, height, label, [_empty_text(width, height, "no tasks recorded")])
    left = 130
    total = max(s.end for s in spans) or 1.0
    factor = (width - left - 10) / total
    body = []
    for i, s in enumerate(spans):
        y = i * row + 2
        body.append(
            f'<text x="0" y="{y + 14}" font-size="12">{escape(s.name[:18])}</text>'
            f'<rect x="{left + s.start * factor:.1f}" y="{y}" '
            f'width="{max((s.end - s.start) * factor, 2):.1f}" height="{row - 6}" '
            f'fill="{colour(s.state)}"><title>{escape(s.title)}</title></rect>'
        )
    body.append(
        f'<text x="{left}" y="{height - 2}" font-size="10" fill="#868e96">0 s</text>'
        f'<text x="{width - 10}" y="{height - 2}" font-size="10" fill="#868e96" '
        f'text-anchor="end">{escape(_seconds(total))}</text>'
    )
    return _svg(width, height, label, body)


def _seconds(total: float) -> str:
    return f"{total * 1000:,.0f} ms" if total < 1 else f"{total:,.1f} s"


@dataclass(frozen=True)
class GraphNode:
    name: str
    kind: str
    upstreams: tuple[str, ...]
    state: str | None  # of its last run; None: it never ran


def layers(nodes: Sequence[GraphNode]) -> list[list[str]]:
    """Nodes in layers left to right (each one right of everything it reads from), each
    layer ordered by where its upstreams stand (fewer crossings)."""
    known = {n.name: n for n in nodes}
    depth: dict[str, int] = {}

    def level(name: str) -> int:
        if name not in depth:
            ups = [u for u in known[name].upstreams if u in known]
            depth[name] = 1 + max((level(u) for u in ups), default=-1)
        return depth[name]

    for n in nodes:
        level(n.name)
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    position: dict[str, float] = {}
    for k, layer in enumerate(out):
        members = [n.name for n in nodes if depth[n.name] == k]

        def barycentre(name: str) -> float:
            ups = [position[u] for u in known[name].upstreams if u in position]
            return sum(ups) / len(ups) if ups else 0.0

        layer.extend(sorted(members, key=lambda m: (barycentre(m), m)) if k else sorted(members))
        position.update({name: float(i) for i, name in enumerate(layer)})
    return out


def dag(nodes: Sequence[GraphNode], label: str) -> Markup:
    """The graph, layered left to right; each node a link to its page, coloured by the
    state of its last run."""
    if not nodes:
        return _svg(400, 60, label, [_empty_text(400, 30, "no loads or models")])
    box_w, box_h, gap_x, gap_y = 170, 34, 70, 16
    placed: dict[str, tuple[float, float]] = {}
    columns = layers(nodes)
    for k, layer in enumerate(columns):
        for i, name in enumerate(layer):
            placed[name] = (10 + k * (box_w + gap_x), 10 + i * (box_h + gap_y))
    width = 20 + len(columns) * (box_w + gap_x) - gap_x
    height = 20 + max(len(c) for c in columns) * (box_h + gap_y) - gap_y
    body = [_edges(nodes, placed, box_w, box_h)]
    for n in nodes:
        x, y = placed[n.name]
        fill = colour(n.state)
        name = n.name if len(n.name) <= 22 else n.name[:21] + "…"
        body.append(
            f'<a href="{escape(node_href(n.name))}" class="dag-node">'
            f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="5" fill="#fff" '
            f'stroke="{fill}" stroke-width="3"/>'
            f'<rect x="{x}" y="{y}" width="8" height="{box_h}" rx="3" fill="{fill}"/>'
            f'<text x="{x + 14}" y="{y + 15}" font-size="12" font-weight="600">'
            f"{escape(name)}</text>"
            f'<text x="{x + 14}" y="{y + 28}" font-size="10" fill="#495057">'
            f"{escape(n.kind)} · {escape(n.state or 'never ran')}</text>"
            f"<title>{escape(n.name)} ({escape(n.kind)}): {escape(n.state or 'never ran')}"
            "</title></a>"
        )
    return _svg(width, height, label, body)


def _edges(
    nodes: Sequence[GraphNode], placed: Mapping[str, tuple[float, float]], w: float, h: float
) -> str:
    paths = []
    for n in nodes:
        x2, y2 = placed[n.name]
        for up in n.upstreams:
            if up not in placed:
                continue
            x1, y1 = placed[up]
            sx, sy, ex, ey = x1 + w, y1 + h / 2, x2, y2 + h / 2
            mid = (sx + ex) / 2
            paths.append(
                f"M{sx:.0f},{sy:.0f} C{mid:.0f},{sy:.0f} {mid:.0f},{ey:.0f} {ex:.0f},{ey:.0f}"
            )
    if not paths:
        return ""
    return f'<path d="{" ".join(paths)}" fill="none" stroke="#adb5bd" stroke-width="1.5"/>'
