"""The dashboard as an ASGI application (Starlette): server-rendered pages, each read
through :mod:`pipeledger.api`, and their JSON twins under ``/api/``, each the document
the CLI prints with ``--json`` for the same question.

Read-only but for one thing: every route is a GET and every question opens a read session,
and each page and document is recorded as one read in the ledger's access audit (its
path, the pipeline it is about, the visitor's address; :mod:`pipeledger.ledger.access`),
which a role that may only SELECT skips without failing the page. Every page and
document passes through :func:`pipeledger.api.redact` on its way out (the config's
passwords and ``${ENV_VAR}`` values never leave), and every template escapes what it
shows (a pipeline named ``<script>`` is text).

==================================  ==========================================================
page                                its JSON twins (the CLI command whose ``--json`` they are)
==================================  ==========================================================
``/`` overview                      ``/api/status`` (``status``), ``/api/anomalies``,
                                    ``/api/blocked``, ``/api/work`` and ``/api/volumes`` (no
                                    command)
``/node/NAME?status=&trigger=...``  ``/api/runs?name=NAME&...`` (``runs NAME ...``),
                                    ``/api/checks/NAME`` (``checks NAME``), ``/api/state?name=``,
                                    ``/api/schedule``, ``/api/tasks?name=``
``/run/RUN_ID``                     ``/api/show/RUN_ID`` (``show``), ``/api/runs?logical_run=``,
                                    ``/api/runs?correlation_id=``, ``/api/quarantine/NAME?run=``
                                    (``quarantine NAME --run``), ``/api/alerts?run=``
``/dag``                            ``/api/dag`` (``dag``)
``/alerts``                         ``/api/sla?limit=`` (``sla``), ``/api/alerts`` (``alerts``)
==================================  ==========================================================

``/api/status`` and ``/api/volumes`` answer a page (``page``, ``limit``: default 50 of every
pipeline, worst first) with ``X-Total-Count`` and ``Link`` headers (:func:`paged_response`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pipeledger import api
from pipeledger.web import charts, views
from pipeledger.web.project import Project

HERE = Path(__file__).parent
Handler = Callable[[Request], Response]


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        ts=views.ts,
        ago=views.ago,
        duration=views.duration,
        node_href=charts.node_href,
        run_href=charts.run_href,
        colour=charts.colour,
        written=views.written,
        span=api.span,
        qs=lambda params: "?" + urlencode(params) if params else "",
    )
    return env


def _status_of(exc: BaseException) -> int:
    if isinstance(exc, views.BadRequest | api.ConfigError):
        return 400
    if isinstance(exc, api.PipeledgerError):
        return 404 if "no run" in str(exc) or "no pipeline" in str(exc) else 400
    return 500


def _error_json(exc: BaseException) -> dict[str, Any]:
    """What the CLI prints with ``--json`` when a command fails before it has results."""
    return {
        "status": "failed",
        "error": api.redact(str(exc) or type(exc).__name__),
        "error_type": type(exc).__name__,
        "exit_code": exc.exit_code if isinstance(exc, api.PipeledgerError) else 1,
    }


def json_response(payload: Any, status: int = 200) -> Response:
    """A document as ``pipeledger ... --json`` prints it (``cli.common.print_json``)."""
    text = api.redact(json.dumps(payload, indent=2, default=str) + "\n")
    return Response(text, status_code=status, media_type="application/json")


def paged_response(request: Request, page: api.Page[Any]) -> Response:
    """A page of a document: its items as the body, the whole answer's count in
    ``X-Total-Count`` and the neighbouring pages in ``Link`` (RFC 8288: ``first``,
    ``prev``, ``next``, ``last``; the request's other parameters kept)."""
    response = json_response(page.items)
    response.headers["X-Total-Count"] = str(page.total)
    numbers = {"first": 1, "last": page.pages}
    if page.has_prev:
        numbers["prev"] = min(page.number - 1, page.pages)
    if page.has_next:
        numbers["next"] = page.number + 1
    kept = {k: v for k, v in request.query_params.items() if k not in ("page", "limit")}
    links = []
    for rel in ("first", "prev", "next", "last"):
        if rel in numbers:
            params = {**kept, "page": str(numbers[rel]), "limit": str(page.limit)}
            links.append(f'<{request.url.path}?{urlencode(params)}>; rel="{rel}"')
    response.headers["Link"] = ", ".join(links)
    return response


class Dashboard:
    """The pages and documents of one project."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.env = templates()

    def reading(self, request: Request) -> AbstractContextManager[None]:
        """The request is one read of the ledger's access audit: its path (without the
        query), the pipeline it is about, the visitor's address."""
        name = request.path_params.get("name") or request.query_params.get("name")
        return api.accessing(
            request.url.path,
            via="web",
            pipeline=name or None,
            client=request.client.host if request.client else None,
            clock=self.project.now,
        )

    def page(self, request: Request, name: str, build: Callable[[], dict[str, Any]]) -> Response:
        started = time.perf_counter()
        try:
            # the page's questions: one connection, not a dozen; one read, not a dozen
            with self.reading(request), api.shared_reads():
                context = build()
            return self._render(name, context, started, 200)
        except Exception as exc:
            error = {"error": api.redact(str(exc)), "kind": type(exc).__name__}
            return self._render("error.html", error, started, _status_of(exc))

    def _render(self, name: str, context: dict[str, Any], started: float, status: int) -> Response:
        context.update(
            here=name.removesuffix(".html"),
            config_file=str(self.project.path),
            render_ms=lambda: (time.perf_counter() - started) * 1000,
        )
        html = self.env.get_template(name).render(context)
        return HTMLResponse(api.redact(html), status_code=status)

    def document(self, request: Request, build: Callable[[], Any]) -> Response:
        try:
            with self.reading(request), api.shared_reads():
                found = build()
            if isinstance(found, api.Page):
                return paged_response(request, found)
            return json_response(found)
        except Exception as exc:
            return json_response(_error_json(exc), _status_of(exc))

    # -- pages ---------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        return self.page(
            request,
            "overview.html",
            lambda: views.overview(self.project, views.OverviewQuery.of(request.query_params)),
        )

    def node(self, request: Request) -> Response:
        name = request.path_params["name"]
        return self.page(
            request,
            "node.html",
            lambda: views.node(self.project, name, views.RunQuery.of(request.query_params)),
        )

    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return self.page(request, "run.html", lambda: views.run(self.project, run_id))

    def dag(self, request: Request) -> Response:
        return self.page(request, "dag.html", lambda: views.dag(self.project))

    def alerts(self, request: Request) -> Response:
        return self.page(
            request,
            "alerts.html",
            lambda: views.alerts(self.project, self._count(request, "limit", views.PAGE_SIZE)),
        )

    # -- documents: each what `pipeledger ... --json` prints -------------------------------

    def _since(self, request: Request, default: str | None = None) -> Any:
        text = request.query_params.get("since") or default
        if not text:
            return None
        try:
            return api.parse_moment(text, self.project.now())
        except ValueError as exc:
            raise views.BadRequest(f"since {exc}") from None

    @staticmethod
    def _count(request: Request, key: str, default: int) -> int:
        """A whole-number query parameter (``tasks``' ``days`` and ``limit``), at least 1."""
        text = request.query_params.get(key) or str(default)
        if not text.isdigit() or int(text) < 1:
            raise views.BadRequest(f"{key} {text!r}: a whole number, at least 1")
        return int(text)

    def _tasks(self, request: Request) -> list[dict[str, Any]]:
        """``pipeledger tasks [NAME] --days --limit --json``."""
        days = self._count(request, "days", api.TASK_DAYS)
        limit = self._count(request, "limit", api.TASK_LIMIT)
        name = request.query_params.get("name") or None
        return [t.to_json() for t in api.tasks(self.project.located, name, days=days, limit=limit)]

    def _status(self, request: Request) -> api.Page[dict[str, Any]]:
        """``pipeledger status --page --limit --json``: a page of every pipeline's health,
        worst first."""
        page, limit = views.paging(request.query_params)
        found = api.page_of(api.status_with_volumes(self.project.located), page, limit)
        return api.Page([s.to_json() for s, _ in found.items], page, limit, found.total)

    def _volumes(self, request: Request) -> api.Page[dict[str, Any]]:
        """The days behind the volume verdicts (``api.volume_days``) of a page of pipelines,
        worst first as ``/api/status`` pages them (``name``: that pipeline's only); the
        total counts pipelines, not days."""
        page, limit = views.paging(request.query_params)
        located, name = self.project.located, request.query_params.get("name") or None
        names = [s.pipeline for s, _ in api.status_with_volumes(located, pipeline=name)]
        shown = api.page_of(names, page, limit)
        days = api.volume_days(located, name, among=shown.items) if shown.items else []
        rank = {n: i for i, n in enumerate(shown.items)}
        days = sorted(days, key=lambda d: rank.get(d.pipeline, len(rank)))  # stable: by day
        return api.Page([d.to_json() for d in days], shown.number, limit, shown.total)

    def _sla(self, request: Request) -> dict[str, Any]:
        """``pipeledger sla --json``; with ``limit``, the alerts page's: the breaches and the
        reliability of the ``limit`` least reliable nodes, worst first, and ``nodes``."""
        if "limit" not in request.query_params:
            return api.sla(self.project.located).to_json()
        limit = self._count(request, "limit", views.PAGE_SIZE)
        return api.sla_page(self.project.located, limit=limit).to_json()

    def api_routes(self) -> list[Route]:
        p = self.project

        def located() -> api.Located:
            return p.located

        def name(request: Request) -> str | None:
            return request.query_params.get("name") or None

        questions: dict[str, Callable[[Request], Any]] = {
            "/api/status": self._status,
            "/api/anomalies": lambda r: [a.to_json() for a in api.anomalies(located(), name(r))],
            "/api/blocked": lambda r: [b.to_json() for b in api.blocked(located())],
            "/api/runs": lambda r: [
                row.to_json()
                for row in views.node_runs(p, name(r), views.RunQuery.of(r.query_params))
            ],
            "/api/show/{run_id}": lambda r: api.show(located(), r.path_params["run_id"]).to_json(),
            "/api/checks/{name:path}": lambda r: [
                c.to_json()
                for c in api.check_history(
                    located(),
                    r.path_params["name"],
                    since=self._since(r),
                    limit=int(r.query_params.get("limit") or 500),
                )
            ],
            "/api/dag": lambda r: api.graph(p.config),
            "/api/schedule": lambda r: api.schedule_status(p.config),
            "/api/state": lambda r: [w.to_json() for w in api.watermarks(located(), name(r))],
            "/api/quarantine/{name:path}": lambda r: [
                e.to_json()
                for e in api.quarantined(
                    p.config,
                    r.path_params["name"],
                    run=r.query_params.get("run") or None,
                    include_resolved=r.query_params.get("all") in ("1", "true"),
                )
            ],
            "/api/sla": self._sla,
            "/api/alerts": lambda r: [
                a.to_json()
                for a in api.recent_alerts(
                    located(),
                    since=self._since(r, "7d"),
                    run_id=r.query_params.get("run") or None,
                )
            ],
            "/api/tasks": self._tasks,
            "/api/work": lambda r: [w.to_json() for w in api.work(located())],
            "/api/volumes": self._volumes,
        }

        def route(path: str, ask: Callable[[Request], Any]) -> Route:
            return Route(path, lambda request: self.document(request, lambda: ask(request)))

        return [route(path, ask) for path, ask in questions.items()]


def create_app(config_path: Path | None = None) -> Starlette:
    """The dashboard of the project whose config is at ``config_path`` (default
    ``./pipeledger.toml``)."""
    board = Dashboard(Project(config_path))

    @asynccontextmanager
    async def serving(app: Starlette) -> AsyncIterator[None]:
        # the ledger's file stays open while the dashboard serves: see api.hold_ledger
        release = api.hold_ledger(board.project.located)
        try:
            yield
        finally:
            release()

    routes = [
        Route("/", board.overview),
        Route("/node/{name:path}", board.node),
        Route("/run/{run_id}", board.run),
        Route("/dag", board.dag),
        Route("/alerts", board.alerts),
        Route("/healthz", lambda request: PlainTextResponse("ok\n")),
        *board.api_routes(),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, lifespan=serving)
