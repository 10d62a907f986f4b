"""Text in PostgreSQL's terms, on SQLite: patterns, ``to_char`` and values printed as text.

``LIKE`` is case-sensitive in PostgreSQL and ASCII-case-insensitive in SQLite, so a
``LIKE`` with a literal pattern becomes SQLite's case-sensitive ``GLOB`` with the same
meaning (``%`` -> ``*``, ``_`` -> ``?``, PostgreSQL's backslash escapes honoured, GLOB's
own ``*?[`` kept literal); ``ILIKE`` becomes SQLite's ``LIKE``, which ignores the case of
ASCII letters (only those: ``upper``/``lower`` and ``ILIKE`` on SQLite leave other letters
as they are).
"""

from __future__ import annotations

from sqlglot import exp

from pipeledger.common.translate.template import call, literal, sql
from pipeledger.common.translate.temporal import Refused, instant_text


def _pattern_parts(pattern: str, escape: str | None) -> list[tuple[str, str]]:
    """A LIKE pattern as (kind, character) pairs: ``any`` (%), ``one`` (_), ``char``."""
    parts: list[tuple[str, str]] = []
    chars = iter(pattern)
    for char in chars:
        if escape and char == escape:
            following = next(chars, None)
            if following is None:
                raise Refused(f"the LIKE pattern {pattern!r} ends with its escape character")
            parts.append(("char", following))
        elif char == "%":
            parts.append(("any", char))
        elif char == "_":
            parts.append(("one", char))
        else:
            parts.append(("char", char))
    return parts


def like_to_glob(pattern: str, escape: str | None = "\\") -> str:
    """A PostgreSQL LIKE pattern as a SQLite GLOB pattern of the same meaning."""
    out = []
    for kind, char in _pattern_parts(pattern, escape):
        if kind == "any":
            out.append("*")
        elif kind == "one":
            out.append("?")
        elif char in "*?[":
            out.append(f"[{char}]")
        else:
            out.append(char)
    return "".join(out)


def like_for_sqlite(pattern: str, escape: str | None = "\\") -> str:
    """A PostgreSQL ILIKE pattern as a SQLite LIKE pattern with ``ESCAPE '\\'``."""
    out = []
    for kind, char in _pattern_parts(pattern, escape):
        if kind == "char" and char in "%_\\":
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


# -- to_char ---------------------------------------------------------------------------

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]


def _names(index: exp.Expr, names: list[str], offset: int) -> exp.Expr:
    cases = " ".join(f"WHEN {i + offset} THEN '{name}'" for i, name in enumerate(names))
    return sql(f"CASE _i {cases} END", i=index)


def _int(x: exp.Expr, spec: str) -> exp.Expr:
    return sql(f"CAST(strftime('{spec}', substr(_x, 1, 19)) AS INTEGER)", x=x)


def _padded(value: exp.Expr, width: int, fill_mode: bool) -> exp.Expr:
    return sql("CAST(_v AS TEXT)", v=value) if fill_mode else call("printf", f"%0{width}d", value)


def _cased(text: exp.Expr, token: str) -> exp.Expr:
    if token.isupper():
        return call("upper", text)
    if token.islower():
        return call("lower", text)
    return text


def _name_field(token: str, x: exp.Expr, fill_mode: bool) -> exp.Expr:
    key = token.lower()
    if key in ("month", "mon"):
        names = _MONTHS if key == "month" else [m[:3] for m in _MONTHS]
        text = _names(_int(x, "%m"), names, 1)
    else:
        names = _DAYS if key == "day" else [d[:3] for d in _DAYS]
        text = _names(_int(x, "%w"), names, 0)
    if key in ("month", "day") and not fill_mode:  # PostgreSQL pads these to 9
        text = call("printf", "%-9s", text)
    return _cased(text, token)


def _numeric_field(token: str, x: exp.Expr, fill_mode: bool) -> exp.Expr:
    key = token.upper()
    widths = {"YYYY": 4, "MM": 2, "DD": 2, "HH24": 2, "HH12": 2, "HH": 2, "MI": 2, "SS": 2}
    sources = {"YYYY": "%Y", "MM": "%m", "DD": "%d", "HH24": "%H", "MI": "%M", "SS": "%S"}
    if key in sources:
        return _padded(_int(x, sources[key]), widths[key], fill_mode)
    if key in ("HH12", "HH"):
        hour = sql("(_h + 11) % 12 + 1", h=_int(x, "%H"))
        return _padded(hour, 2, fill_mode)
    if key == "YY":
        return call("substr", call("strftime", "%Y", x), 3, 2)
    if key == "DDD":
        return _padded(_int(x, "%j"), 3, fill_mode)
    if key == "D":
        return sql("CAST(_w + 1 AS TEXT)", w=_int(x, "%w"))
    if key == "ID":
        return sql("CAST((_w + 6) % 7 + 1 AS TEXT)", w=_int(x, "%w"))
    if key == "Q":
        return sql("CAST((_m + 2) / 3 AS TEXT)", m=_int(x, "%m"))
    if key == "IW":
        thursday = call("date", call("substr", x, 1, 19), "-3 days", "weekday 4")
        week = sql("(_j - 1) / 7 + 1", j=_int(thursday, "%j"))
        return _padded(week, 2, fill_mode)
    if key == "MS":
        return call("substr", sql("_x || '.000000'", x=x), 21, 3)
    if key == "US":
        return call("substr", sql("_x || '.000000'", x=x), 21, 6)
    raise Refused(f"to_char pattern {token}")


_NUMERIC_TOKENS = frozenset(
    [
        "YYYY",
        "YY",
        "MM",
        "DD",
        "DDD",
        "D",
        "ID",
        "IW",
        "HH24",
        "HH12",
        "HH",
        "MI",
        "SS",
        "MS",
        "US",
        "Q",
    ]
)
_NAME_TOKENS = frozenset(["MONTH", "MON", "DAY", "DY"])
_MERIDIEM_TOKENS = frozenset(["AM", "PM", "A.M.", "P.M."])
# patterns PostgreSQL knows and this translation does not: refused, never printed as text
_UNSUPPORTED = frozenset(
    [
        "IYYY",
        "IYY",
        "IY",
        "I",
        "Y,YYY",
        "YYY",
        "Y",
        "SSSSS",
        "SSSS",
        "TZH",
        "TZM",
        "TZ",
        "OF",
        "CC",
        "RM",
        "WW",
        "W",
        "J",
        "TH",
        "TM",
        "FX",
        "SP",
    ]
)
_KEYWORDS = sorted(
    {"FM", *_NUMERIC_TOKENS, *_NAME_TOKENS, *_MERIDIEM_TOKENS, *_UNSUPPORTED},
    key=len,
    reverse=True,
)


def _tokens(template: str) -> list[str]:
    """The template's patterns (as written) and literal characters, as PostgreSQL reads
    them: the longest pattern at each position (any case), a quoted literal, else one
    character."""
    tokens, i = [], 0
    while i < len(template):
        if template[i] == '"':
            close = template.find('"', i + 1)
            end = len(template) if close < 0 else close + 1
            tokens.append(template[i:end])
            i = end
            continue
        found = next((k for k in _KEYWORDS if template[i : i + len(k)].upper() == k), None)
        token = template[i : i + len(found)] if found else template[i]
        tokens.append(token)
        i += len(token)
    return tokens


def to_char(x: exp.Expr, template: str) -> exp.Expr:
    """``to_char(date or timestamp, 'template')`` for the template patterns of dates and
    times (YYYY, MM, DD, HH24, MI, SS, Month, Day, ...); others are refused, naming them."""
    pieces: list[exp.Expr] = []
    fill_mode = False
    for token in _tokens(template):
        if token.upper() == "FM":
            fill_mode = True
            continue
        pieces.append(_token(token, x, fill_mode))
        fill_mode = False
    if not pieces:
        return literal("")
    result = pieces[0]
    for piece in pieces[1:]:
        result = sql("_a || _b", a=result, b=piece)
    return sql("CASE WHEN _x IS NULL THEN NULL ELSE _r END", x=x, r=result)


def _token(token: str, x: exp.Expr, fill_mode: bool) -> exp.Expr:
    upper = token.upper()
    if token.startswith('"'):
        return literal(token[1:-1] if token.endswith('"') and len(token) > 1 else token[1:])
    if upper in _UNSUPPORTED:
        raise Refused(f"to_char pattern {token}")
    if upper in _MERIDIEM_TOKENS:
        morning, evening = ("A.M.", "P.M.") if "." in token else ("AM", "PM")
        if token.islower():
            morning, evening = morning.lower(), evening.lower()
        return sql(f"CASE WHEN _h < 12 THEN '{morning}' ELSE '{evening}' END", h=_int(x, "%H"))
    if upper in _NAME_TOKENS:
        return _name_field(token, x, fill_mode)
    if upper in _NUMERIC_TOKENS:
        return _numeric_field(token, x, fill_mode)
    return literal(token)


# -- values as text ----------------------------------------------------------------------


def as_text(x: exp.Expr, kind: str | None, scale: int | None, booleans: str) -> exp.Expr:
    """A value of PostgreSQL type ``kind`` as PostgreSQL prints it (``booleans``: how true
    prints: ``true`` for a cast, ``t`` for ``concat``)."""
    if kind in ("timestamp", "timestamptz", "time"):
        return instant_text(x, kind)
    if kind == "boolean":
        yes, no = ("true", "false") if booleans == "true" else ("t", "f")
        return sql(f"CASE _x WHEN 1 THEN '{yes}' WHEN 0 THEN '{no}' END", x=x)
    if kind == "numeric" and scale is not None:
        return sql(f"CASE WHEN _x IS NULL THEN NULL ELSE printf('%.{scale}f', _x) END", x=x)
    if kind in ("real", "double precision"):  # 1e-07, not SQLite's 1.0e-07
        return sql(
            "CASE WHEN _x = CAST(_x AS INTEGER) AND abs(_x) < 1e15 "
            "THEN CAST(CAST(_x AS INTEGER) AS TEXT) ELSE replace(CAST(_x AS TEXT), '.0e', 'e') END",
            x=x,
        )
    if kind == "interval":
        raise Refused("an interval printed as text (PostgreSQL's interval format)")
    if kind in ("text", "unknown", "date", "uuid", "null", None):
        return x
    return sql("CAST(_x AS TEXT)", x=x)
