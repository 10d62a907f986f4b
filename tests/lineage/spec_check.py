"""Validate OpenLineage events against the vendored spec (``spec/``, see its README): the
event against ``OpenLineage.json``'s ``RunEvent``, and every facet in it against its own
schema, the one whose ``$id`` its ``_schemaURL`` names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

SPEC = Path(__file__).parent / "spec"
EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


@cache
def registry() -> Registry[Any]:
    resources = []
    for path in [SPEC / "OpenLineage.json", *sorted((SPEC / "facets").glob("*.json"))]:
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def validator(url: str) -> Draft202012Validator:
    """A validator of the definition ``url`` (``<$id>#/$defs/<name>``) names."""
    base = url.partition("#")[0]
    assert base in registry(), f"{base} is not vendored in tests/lineage/spec"
    return Draft202012Validator({"$ref": url}, registry=registry(), format_checker=FormatChecker())


def facets(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every facet of the event, named by where it is."""
    groups = [("run", event["run"].get("facets", {})), ("job", event["job"].get("facets", {}))]
    for kind in ("inputs", "outputs"):
        for dataset in event.get(kind, []):
            for key in ("facets", "inputFacets", "outputFacets"):
                groups.append((f"{kind}:{dataset['name']}:{key}", dataset.get(key, {})))
    for where, group in groups:
        for name, facet in group.items():
            yield f"{where}.{name}", facet


def check_event(event: dict[str, Any]) -> None:
    """Raise (jsonschema's ValidationError, or AssertionError) unless ``event`` is valid."""
    validator(EVENT).validate(event)
    datetime.fromisoformat(event["eventTime"])  # format "date-time" (not checked above)
    for where, facet in facets(event):
        assert "_schemaURL" in facet, f"{where}: no _schemaURL"
        errors = list(validator(facet["_schemaURL"]).iter_errors(facet))
        assert not errors, f"{where}: {[e.message for e in errors]}"
