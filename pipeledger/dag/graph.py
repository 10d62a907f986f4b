"""The graph of loads and models: edges from ``depends_on``, from the tables a model's SQL
reads and from a load's ``table`` source in the warehouse (see ``Config.upstreams``), and
dbt-like selectors over it:

=================  ==========================================================
``NAME``           the node
``NAME+``          the node and everything downstream of it
``+NAME``          the node and everything upstream of it
``+NAME+``         both
``tag:daily``      every node tagged ``daily`` (``tags = [...]``)
=================  ==========================================================

Several selectors select their union; none selects every node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from typing import Any, Literal

from pipeledger.config.model import Config, ModelConfig
from pipeledger.errors import ConfigError

NodeKind = Literal["load", "model"]


@dataclass(frozen=True)
class Graph:
    kinds: dict[str, NodeKind]
    upstreams: dict[str, tuple[str, ...]]
    tags: dict[str, tuple[str, ...]]
    targets: dict[str, str]
    # models: what an incremental run recomputes (common.lineage.Plan.to_json)
    recompute: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, config: Config) -> Graph:
        nodes = config.nodes
        return cls(
            kinds={n: "model" if isinstance(c, ModelConfig) else "load" for n, c in nodes.items()},
            upstreams={name: config.upstreams(name) for name in nodes},
            tags={name: tuple(node.tags) for name, node in nodes.items()},
            targets={name: node.target for name, node in nodes.items()},
            recompute={name: config.plan_json(name) for name in config.models},
        )

    @property
    def edges(self) -> list[tuple[str, str]]:
        return sorted((up, down) for down, ups in self.upstreams.items() for up in ups)

    def downstream(self, name: str) -> set[str]:
        """Every node that reads ``name``'s output, directly or through others."""
        return self._reach(
            name, {n: {d for d, ups in self.upstreams.items() if n in ups} for n in self.kinds}
        )

    def upstream(self, name: str) -> set[str]:
        return self._reach(name, {n: set(ups) for n, ups in self.upstreams.items()})

    @staticmethod
    def _reach(start: str, step: dict[str, set[str]]) -> set[str]:
        seen: set[str] = set()
        todo = list(step[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(step[node])
        return seen

    def select(self, selectors: Sequence[str]) -> list[str]:
        """The selected nodes, in dependency order (ties: by name)."""
        if not selectors:  # every node (not each one's upstreams, one walk per node)
            return self.ordered(self.kinds)
        chosen: set[str] = set()
        for selector in selectors:
            chosen |= self._one(selector)
        return self.ordered(chosen)

    def _one(self, selector: str) -> set[str]:
        if selector.startswith("tag:"):
            tag = selector.removeprefix("tag:")
            found = {n for n, tags in self.tags.items() if tag in tags}
            if not found:
                raise ConfigError(f"selector {selector!r}: no pipeline or model has this tag")
            return found
        name = selector.strip("+")
        if name not in self.kinds:
            known = ", ".join(sorted(self.kinds)) or "none"
            raise ConfigError(
                f"selector {selector!r}: no pipeline or model named {name!r} (defined: {known})"
            )
        found = {name}
        if selector.endswith("+"):
            found |= self.downstream(name)
        if selector.startswith("+"):
            found |= self.upstream(name)
        return found

    def ordered(self, names: Iterable[str]) -> list[str]:
        chosen = set(names)
        order = TopologicalSorter(
            {n: [u for u in self.upstreams[n] if u in chosen] for n in sorted(chosen)}
        )
        order.prepare()
        out: list[str] = []
        while order.is_active():
            ready = sorted(order.get_ready())
            out.extend(ready)
            order.done(*ready)
        return out

    def to_json(self, last: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """Nodes (kind, target, tags, upstreams, last run) and edges."""
        last = last or {}
        nodes = [
            {
                "name": n,
                "kind": self.kinds[n],
                "target": self.targets[n],
                "tags": list(self.tags[n]),
                "upstreams": list(self.upstreams[n]),
                **({"incremental": self.recompute[n]} if n in self.recompute else {}),
                "last_run": last.get(n),
            }
            for n in self.ordered(self.kinds)
        ]
        return {"nodes": nodes, "edges": [{"from": u, "to": d} for u, d in self.edges]}
