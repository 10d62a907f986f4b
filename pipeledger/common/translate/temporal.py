"""Dates, times and intervals of PostgreSQL, as SQLite computes them on the text pipeledger
stores them as: a date ``YYYY-MM-DD``, a timestamp ``YYYY-MM-DDTHH:MM:SS.ffffff`` (a
timestamptz in UTC, with ``+00:00``), a time ``HH:MM:SS.ffffff``; an interval column holds
integer microseconds. Every expression built here yields exactly that text, so that results
compare, sort and store like loaded values.

Intervals are kept apart while they are translated, as months, days and microseconds
(:class:`Span`), because PostgreSQL adds them in that order: months first, clamped to the
end of the month (``2024-01-31 + 1 month`` is ``2024-02-29``; SQLite's own ``+1 months``
would give ``2024-03-02``), then days, then time. Constant arithmetic (``date '1998-12-01'
- interval '90' day``) is folded here exactly, to a literal.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, time, timedelta

from sqlglot import exp

from pipeledger.common.translate.template import call, literal, sql

MICROS_PER_DAY = 86_400_000_000
_ZERO_TIME = "T00:00:00.000000"
UTC_SUFFIX = "+00:00"


class Refused(Exception):
    """A construct with no SQLite translation: why, in words."""


# -- intervals -------------------------------------------------------------------------


class Span(exp.Expression):
    """An interval while it is translated: months, days and microseconds, each a SQLite
    integer expression (a literal when constant)."""

    arg_types = {"months": True, "days": True, "micros": True}  # noqa: RUF012 (sqlglot's API)

    def part(self, name: str) -> exp.Expr:
        value = self.args[name]
        assert isinstance(value, exp.Expr)
        return value

    def constant(self, name: str) -> int | None:
        return constant_int(self.part(name))


def span(months: int | exp.Expr = 0, days: int | exp.Expr = 0, micros: int | exp.Expr = 0) -> Span:
    def part(value: int | exp.Expr) -> exp.Expr:
        return literal(value) if isinstance(value, int) else value

    return Span(months=part(months), days=part(days), micros=part(micros))


def constant_int(node: exp.Expr) -> int | None:
    """The integer a literal (or a negated literal) holds; None if it is not one."""
    if isinstance(node, exp.Neg):
        inner = constant_int(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Paren):
        return constant_int(node.this)
    if isinstance(node, exp.Literal) and not node.is_string and re.fullmatch(r"\d+", node.this):
        return int(node.this)
    return None


_UNITS: dict[str, tuple[str, int]] = {
    "microsecond": ("micros", 1),
    "millisecond": ("micros", 1_000),
    "second": ("micros", 1_000_000),
    "minute": ("micros", 60_000_000),
    "hour": ("micros", 3_600_000_000),
    "day": ("days", 1),
    "week": ("days", 7),
    "month": ("months", 1),
    "year": ("months", 12),
    "decade": ("months", 120),
    "century": ("months", 1200),
    "millennium": ("months", 12000),
}
_UNIT_ALIASES = {
    "us": "microsecond",
    "usec": "microsecond",
    "usecs": "microsecond",
    "microseconds": "microsecond",
    "ms": "millisecond",
    "msec": "millisecond",
    "msecs": "millisecond",
    "milliseconds": "millisecond",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "seconds": "second",
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "minutes": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "hours": "hour",
    "d": "day",
    "days": "day",
    "w": "week",
    "weeks": "week",
    "mon": "month",
    "mons": "month",
    "months": "month",
    "y": "year",
    "yr": "year",
    "yrs": "year",
    "years": "year",
    "decades": "decade",
    "centuries": "century",
    "millennia": "millennium",
    "millenniums": "millennium",
}


def unit_name(text: str) -> str | None:
    lowered = text.strip().lower()
    name = _UNIT_ALIASES.get(lowered, lowered)
    return name if name in _UNITS else None


def parse_interval(text: str, unit: str | None = None) -> Span:
    """A constant interval as PostgreSQL reads it: ``'90' day``, ``'1 day 2 hours'``,
    ``'1 mon -2 days 03:00:00'``, ``'1.5 days'`` (fractions spill into the smaller parts,
    a month of 30 days), ``... ago``. Raises :class:`Refused` for what it does not read."""
    months, days, micros = 0.0, 0.0, 0.0
    body = text.strip().lower()
    sign = -1 if body.endswith(" ago") else 1
    body = body.removesuffix(" ago").strip()
    if unit is not None:
        body = f"{body} {unit}"
    clock = re.search(r"(-?)(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d+)?))?$", body)
    if clock:
        negative, h, m, s = clock.groups()
        seconds = int(h) * 3600 + int(m) * 60 + float(s or 0)
        micros += (-1 if negative else 1) * seconds * 1_000_000
        body = body[: clock.start()].strip()
    tokens = body.split()
    if len(tokens) % 2:
        raise Refused(f"the interval {text!r} is not one pipeledger can read")
    for amount, word in zip(tokens[::2], tokens[1::2], strict=True):
        name = unit_name(word)
        try:
            value = float(amount)
        except ValueError:
            name = None
        if name is None:
            raise Refused(f"the interval {text!r} is not one pipeledger can read")
        part, factor = _UNITS[name]
        if part == "months":
            months += value * factor
        elif part == "days":
            days += value * factor
        else:
            micros += value * factor
    whole_months = int(months)
    days += (months - whole_months) * 30
    whole_days = int(days)
    micros += (days - whole_days) * MICROS_PER_DAY
    return span(sign * whole_months, sign * whole_days, sign * round(micros))


def negate(value: Span) -> Span:
    return Span(**{k: _negated(value.part(k)) for k in ("months", "days", "micros")})


def _negated(node: exp.Expr) -> exp.Expr:
    number = constant_int(node)
    return literal(-number) if number is not None else sql("-_x", x=node)


def add_spans(a: Span, b: Span) -> Span:
    return Span(**{k: _sum(a.part(k), b.part(k)) for k in ("months", "days", "micros")})


def _sum(a: exp.Expr, b: exp.Expr) -> exp.Expr:
    x, y = constant_int(a), constant_int(b)
    if x is not None and y is not None:
        return literal(x + y)
    if x == 0:
        return b
    if y == 0:
        return a
    return sql("_a + _b", a=a, b=b)


def scale_span(value: Span, factor: exp.Expr) -> Span:
    """An interval times an integer (PostgreSQL multiplies each part)."""
    n = constant_int(factor)

    def times(part: exp.Expr) -> exp.Expr:
        x = constant_int(part)
        if x is not None and n is not None:
            return literal(x * n)
        if x == 0:
            return literal(0)
        return sql("_a * _b", a=part, b=factor)

    return Span(**{k: times(value.part(k)) for k in ("months", "days", "micros")})


def span_micros(value: Span) -> exp.Expr:
    """An interval as the integer microseconds an interval column holds; an interval of
    months has no fixed length (:class:`Refused`)."""
    if value.constant("months") != 0:
        raise Refused("an interval of months or years has no fixed length to store or compare")
    days, micros = value.constant("days"), value.constant("micros")
    if days is not None and micros is not None:
        return literal(days * MICROS_PER_DAY + micros)
    if days == 0:
        return value.part("micros")
    return sql(f"_d * {MICROS_PER_DAY} + _u", d=value.part("days"), u=value.part("micros"))


# -- constant values -------------------------------------------------------------------


def parse_constant(text: str, kind: str) -> str:
    """A date, timestamp, timestamptz or time literal as pipeledger stores it; raises
    :class:`Refused` for what Python's ISO 8601 reader does not read (``'today'``)."""
    cleaned = text.strip()
    try:
        if kind == "date":
            return datetime.fromisoformat(cleaned).date().isoformat()
        if kind == "time":
            return _time_text(time.fromisoformat(cleaned))
        value = datetime.fromisoformat(
            cleaned.replace(" ", "T", 1) if "T" not in cleaned else cleaned
        )
    except ValueError:
        raise Refused(
            f"{kind} {text!r} is not an ISO 8601 {kind} SQLite can compute with"
        ) from None
    if kind == "timestamptz":
        value = value.replace(tzinfo=value.tzinfo or UTC).astimezone(UTC)
    return format_instant(value.replace(tzinfo=None), kind)


def format_instant(value: datetime, kind: str) -> str:
    if kind == "date":
        return value.date().isoformat()
    text = value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text + UTC_SUFFIX if kind == "timestamptz" else text


def _time_text(value: time) -> str:
    return value.strftime("%H:%M:%S.%f")


def read_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.removesuffix(UTC_SUFFIX))


def fold(text: str, kind: str, value: Span, result: str) -> str | None:
    """``text`` (a stored constant of ``kind``) plus a constant interval, or None when the
    interval is not constant."""
    months, days, micros = (value.constant(k) for k in ("months", "days", "micros"))
    if months is None or days is None or micros is None:
        return None
    instant = read_instant(text)
    if months:
        year, month = divmod(instant.month - 1 + months, 12)
        year += instant.year
        day = min(instant.day, calendar.monthrange(year, month + 1)[1])
        instant = instant.replace(year=year, month=month + 1, day=day)
    instant += timedelta(days=days, microseconds=micros)
    return format_instant(instant, result)


def midnight_date(text: str) -> str | None:
    """The date of a stored timestamp constant that falls on midnight, else None."""
    instant = read_instant(text)
    return instant.date().isoformat() if instant.time() == time() else None


# -- SQL over stored text ------------------------------------------------------------


def seconds(x: exp.Expr) -> exp.Expr:
    """A stored date or timestamp without its fraction (and a timestamptz's ``+00:00``):
    SQLite's date functions round a fraction to milliseconds once a modifier applies, so
    23:59:59.999999 would become the next day."""
    return call("substr", x, 1, 19)


def fraction(x: exp.Expr) -> exp.Expr:
    """A stored timestamp's ``.ffffff`` (a date's: ``.000000``)."""
    return sql("CASE WHEN substr(_x, 20, 1) = '.' THEN substr(_x, 20, 7) ELSE '.000000' END", x=x)


def epoch_micros(x: exp.Expr) -> exp.Expr:
    """A stored date or timestamp as integer microseconds since 1970 (exact)."""
    return sql(
        "CAST(strftime('%s', substr(_x, 1, 19)) AS INTEGER) * 1000000 "
        "+ CAST(substr(_f, 2) AS INTEGER)",
        x=x,
        f=fraction(x),
    )


def from_epoch_micros(v: exp.Expr, kind: str) -> exp.Expr:
    """Integer microseconds since 1970 as a stored timestamp (floor division: exact before
    1970 too)."""
    rest = sql("((_v % 1000000) + 1000000) % 1000000", v=v)
    text = sql(
        "strftime('%Y-%m-%dT%H:%M:%S', (_v - _r) / 1000000, 'unixepoch') || printf('.%06d', _r)",
        v=v,
        r=rest,
    )
    return with_zone(text, kind)


def with_zone(text: exp.Expr, kind: str) -> exp.Expr:
    return sql("_t || '+00:00'", t=text) if kind == "timestamptz" else text


def as_kind(x: exp.Expr, source: str, target: str) -> exp.Expr:
    """A stored date, timestamp or timestamptz as stored text of another of them (sessions
    are in UTC: a timestamp is a UTC instant)."""
    if source == target:
        return x
    if isinstance(x, exp.Literal) and x.is_string:
        if source == "date":
            return literal(format_instant(datetime.fromisoformat(x.this), target))
        return literal(format_instant(read_instant(x.this), target))
    if target == "date":
        return call("substr", x, 1, 10)
    if source == "date":
        return sql(f"_x || '{_ZERO_TIME}{UTC_SUFFIX if target == 'timestamptz' else ''}'", x=x)
    if target == "timestamptz":
        return sql("_x || '+00:00'", x=x)
    return call("substr", x, 1, 26)


def add_interval(x: exp.Expr, kind: str, value: Span, result: str) -> exp.Expr:
    """``x`` (stored text of ``kind``) plus an interval, as stored text of ``result``."""
    if isinstance(x, exp.Literal) and x.is_string:
        folded = fold(x.this, kind, value, result)
        if folded is not None:
            return literal(folded)
    months, days, micros = (value.constant(k) for k in ("months", "days", "micros"))
    if kind == "date" and result == "date":  # date +- integer days
        return call("date", x, _shift(value.part("days"), "days"))
    if months == 0 and micros == 0 and kind == "date":  # a date has no fraction
        return sql(f"date(_x, _s) || '{_ZERO_TIME}'", x=x, s=_shift(value.part("days"), "days"))
    whole = x if months == 0 else _add_months(x, kind, value.part("months"))
    if days is not None and micros is not None and micros % 1_000_000 == 0:
        shifted = call(
            "strftime",
            "%Y-%m-%dT%H:%M:%S",
            seconds(whole),
            f"{days:+d} days",
            f"{micros // 1_000_000:+d} seconds",
        )
        return with_zone(sql("_w || _f", w=shifted, f=fraction(x)), result)
    base = epoch_micros(x if months == 0 else sql("_w || _f", w=whole, f=fraction(x)))
    total = sql(
        f"_b + _d * {MICROS_PER_DAY} + _u", b=base, d=value.part("days"), u=value.part("micros")
    )
    return from_epoch_micros(total, result)


def _shift(amount: exp.Expr, unit: str) -> exp.Expr:
    """A SQLite date modifier: ``'+3 days'`` (constant) or its ``printf`` (an expression)."""
    n = constant_int(amount)
    if n is not None:
        return literal(f"{n:+d} {unit}")
    # printf('%d', NULL) is '0': a NULL amount must give a NULL modifier (and date: NULL)
    return sql(f"CASE WHEN _n IS NULL THEN NULL ELSE printf('%+d {unit}', _n) END", n=amount)


def _add_months(x: exp.Expr, kind: str, months: exp.Expr) -> exp.Expr:
    """``x`` plus whole months, clamped to the end of the month (PostgreSQL's rule), as
    ``YYYY-MM-DDTHH:MM:SS`` text."""
    base = sql("date(_x, 'start of month', _s)", x=seconds(x), s=_shift(months, "months"))
    day = sql(
        "date(_b, printf('+%d days', min(CAST(strftime('%d', _x) AS INTEGER), "
        "CAST(strftime('%d', _b, '+1 months', '-1 days') AS INTEGER)) - 1))",
        b=base,
        x=x,
    )
    clock = literal("T00:00:00") if kind == "date" else call("substr", x, 11, 9)
    return sql("_d || _c", d=day, c=clock)


def date_difference(a: exp.Expr, b: exp.Expr) -> exp.Expr:
    """``date - date``: whole days (julian days of dates are exact halves)."""
    return sql("CAST(round(julianday(_a) - julianday(_b)) AS INTEGER)", a=a, b=b)


def instant_difference(a: exp.Expr, b: exp.Expr) -> Span:
    """``timestamp - timestamp``: an interval of microseconds."""
    return span(micros=sql("_a - _b", a=epoch_micros(a), b=epoch_micros(b)))


# -- extract, date_trunc ---------------------------------------------------------------


def _part(x: exp.Expr, spec: str) -> exp.Expr:
    return sql(f"CAST(strftime('{spec}', _x) AS INTEGER)", x=seconds(x))


def _iso_thursday(x: exp.Expr) -> exp.Expr:
    return call("date", seconds(x), "-3 days", "weekday 4")


def extract(field: str, x: exp.Expr, kind: str) -> exp.Expr:
    """``extract(field from x)`` of a stored date, timestamp(tz) or time; an interval
    column (microseconds) answers only ``epoch``."""
    if kind == "interval":
        if field != "epoch":
            raise Refused(
                f"extract({field}) of an interval: SQLite keeps intervals as microseconds, "
                "without PostgreSQL's days and months"
            )
        return sql("_x / 1000000.0", x=x)
    seconds = sql(
        "_s + CAST(substr(_f, 2) AS INTEGER) / 1000000.0", s=_part(x, "%S"), f=fraction(x)
    )
    year = _part(x, "%Y")
    fields: dict[str, exp.Expr] = {
        "year": year,
        "month": _part(x, "%m"),
        "day": _part(x, "%d"),
        "hour": _part(x, "%H"),
        "minute": _part(x, "%M"),
        "second": seconds,
        "milliseconds": sql("_s * 1000", s=seconds),
        "microseconds": sql(
            "_s * 1000000 + CAST(substr(_f, 2) AS INTEGER)", s=_part(x, "%S"), f=fraction(x)
        ),
        "dow": _part(x, "%w"),
        "isodow": sql("(_w + 6) % 7 + 1", w=_part(x, "%w")),
        "doy": _part(x, "%j"),
        "quarter": sql("(_m + 2) / 3", m=_part(x, "%m")),
        "week": sql("(_j - 1) / 7 + 1", j=_part(_iso_thursday(x), "%j")),
        "isoyear": _part(_iso_thursday(x), "%Y"),
        "decade": sql("_y / 10", y=year),
        "century": sql("(_y + 99) / 100", y=year),
        "millennium": sql("(_y + 999) / 1000", y=year),
    }
    if field == "epoch":
        whole = sql("CAST(strftime('%s', substr(_x, 1, 19)) AS INTEGER)", x=x)
        if kind == "date":
            return whole
        return sql("_w + CAST(substr(_f, 2) AS INTEGER) / 1000000.0", w=whole, f=fraction(x))
    if field not in fields:
        raise Refused(f"extract({field}): SQLite keeps no {field} (only UTC times)")
    if kind == "time" and field not in ("hour", "minute", "second", "milliseconds", "microseconds"):
        raise Refused(f"extract({field}) of a time")
    return fields[field]


_TRUNCATED = {
    "second": "%Y-%m-%dT%H:%M:%S.000000",
    "minute": "%Y-%m-%dT%H:%M:00.000000",
    "hour": "%Y-%m-%dT%H:00:00.000000",
    "day": "%Y-%m-%dT00:00:00.000000",
    "month": "%Y-%m-01T00:00:00.000000",
    "year": "%Y-01-01T00:00:00.000000",
}


def truncate(unit: str, x: exp.Expr, kind: str, result: str) -> exp.Expr:
    """``date_trunc(unit, x)`` as stored text of ``result`` (a date truncates to a
    timestamptz in PostgreSQL)."""
    name = unit_name(unit) or unit.lower()
    if name in _TRUNCATED:
        text = call("strftime", _TRUNCATED[name], seconds(x))
    elif name == "week":
        text = call("strftime", _TRUNCATED["day"], seconds(x), "-6 days", "weekday 1")
    elif name == "quarter":
        month = sql("((CAST(strftime('%m', _x) AS INTEGER) - 1) / 3) * 3 + 1", x=x)
        text = sql(
            "strftime('%Y-', _x) || printf('%02d', _m) || '-01T00:00:00.000000'", x=x, m=month
        )
    elif name in ("decade", "century", "millennium"):
        year = _part(x, "%Y")
        first = {
            "decade": sql("(_y / 10) * 10", y=year),
            "century": sql("((_y - 1) / 100) * 100 + 1", y=year),
            "millennium": sql("((_y - 1) / 1000) * 1000 + 1", y=year),
        }[name]
        text = sql(
            "CASE WHEN _y IS NULL THEN NULL "
            "ELSE printf('%04d', _y) || '-01-01T00:00:00.000000' END",
            y=first,
        )
    elif name == "millisecond":
        text = sql("strftime('%Y-%m-%dT%H:%M:%f', _x) || '000'", x=x)
    elif name == "microsecond":
        text = as_kind(x, kind, "timestamp") if kind == "date" else call("substr", x, 1, 26)
    else:
        raise Refused(f"date_trunc('{unit}'): not a unit PostgreSQL truncates to")
    return with_zone(text, result)


# -- text ------------------------------------------------------------------------------


def instant_text(x: exp.Expr, kind: str) -> exp.Expr:
    """A stored timestamp(tz) or time as PostgreSQL prints it: a space for the ``T``, the
    fraction without trailing zeros, a timestamptz with ``+00``."""
    core = call("substr", x, 1, 26) if kind != "time" else x
    trimmed = sql(
        "CASE WHEN instr(_c, '.') > 0 THEN rtrim(rtrim(_c, '0'), '.') ELSE _c END", c=core
    )
    if kind == "time":
        return trimmed
    spaced = call("replace", trimmed, "T", " ")
    return sql("_s || '+00'", s=spaced) if kind == "timestamptz" else spaced


def now(kind: str) -> exp.Expr:
    """The current instant (UTC; SQLite knows milliseconds) or date."""
    if kind == "date":
        return call("date", "now")
    return with_zone(sql("strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000'"), kind)


def text_to_instant(x: exp.Expr, kind: str) -> exp.Expr:
    """Text cast to a date, timestamp(tz) or time (SQLite reads it to the millisecond)."""
    if kind == "date":
        return call("date", x)
    if kind == "time":
        return sql("strftime('%H:%M:%f', _x) || '000'", x=x)
    return with_zone(sql("strftime('%Y-%m-%dT%H:%M:%f', _x) || '000'", x=x), kind)
