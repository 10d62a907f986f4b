"""What every command shares: the app, consoles, global options, error and JSON output.

The command line is click's; rich prints the output on a terminal, and
:mod:`pipeledger.cli.plain` the same text without rich elsewhere (a pipe, a file). Neither
rich nor the library is imported before a command needs it: ``pipeledger --help`` loads
click and a few small modules of ours, and the consoles below are created on their first
use."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from pipeledger import api
from pipeledger.api import PipeledgerError, redact
from pipeledger.cli import plain

if TYPE_CHECKING:  # imported by the commands that use them: --help needs none
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])


class LazyConsole:
    """A rich console made when something is first printed to a terminal (rich costs a
    quick command about a fifth of its start-up, and ``--help`` prints nothing with it).
    Where the output is not a terminal, :mod:`pipeledger.cli.plain` writes the same text
    without rich."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr

    @property
    def _stream(self) -> TextIO:
        # looked up at each print, as rich does: a test runner swaps the streams
        return sys.stderr if self._stderr else sys.stdout

    def _plain(self) -> bool:
        return "console" not in self.__dict__ and plain.is_terminal(self._stream) is False

    @cached_property
    def console(self) -> Console:
        from rich.console import Console

        return Console(stderr=self._stderr, emoji=False)  # ":name:" in data stays text

    def print(self, *objects: Any, **options: Any) -> None:
        text = plain.render(objects, options) if self._plain() else None
        if text is None:
            self.console.print(*objects, **options)
            return
        stream = self._stream
        stream.write(text)
        stream.flush()

    def lines(self, lines: Iterable[str]) -> None:
        """Print ``lines`` (rich markup, not wrapped) in one call: rich's cost is per call,
        and a ledger of many pipelines has many lines."""
        text = list(lines)
        if text:
            self.print("\n".join(text), soft_wrap=True, highlight=False)

    @property
    def is_terminal(self) -> bool:
        if self._plain():
            return False
        return self.console.is_terminal


out = LazyConsole()
err = LazyConsole(stderr=True)


class _Group(click.Group):
    """Commands listed in the order they are defined (``run`` first), not sorted."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        OPTIONS.config_path, OPTIONS.debug = None, False  # each invocation its own options
        return super().make_context(info_name, args, parent, **extra)


class _Options:
    config_path: Path | None = None
    debug: bool = False


OPTIONS = _Options()


def _set_config(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        OPTIONS.config_path = value


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        OPTIONS.debug = True


def _set_verbose(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        import logging

        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")


def global_options() -> list[click.Option]:
    """``--config/-c``, ``--debug`` and ``--verbose/-v``: given before the command
    (``pipeledger -v run``) or after it (``pipeledger run -v``), to the same effect."""
    return [
        click.Option(
            ["--config", "-c"],
            type=click.Path(dir_okay=False, path_type=Path),
            help="Config file (default ./pipeledger.toml).",
            expose_value=False,
            callback=_set_config,
        ),
        click.Option(
            ["--debug"],
            is_flag=True,
            help="Show tracebacks.",
            expose_value=False,
            callback=_set_debug,
        ),
        click.Option(
            ["--verbose", "-v"],
            is_flag=True,
            help="Log progress.",
            expose_value=False,
            callback=_set_verbose,
        ),
    ]


def with_global_options(command: click.Command) -> None:
    """Every command of the tree under ``command`` also takes the global options: one set
    of them, shared (an option keeps no state of its own between invocations; making a set
    per command cost every start-up a few percent)."""
    shared = global_options()

    def add(command: click.Command) -> None:
        if isinstance(command, click.Group):
            for sub in command.commands.values():
                add(sub)
            return
        taken = {name for p in command.params for name in p.opts}
        command.params += [o for o in shared if not taken & set(o.opts)]

    add(command)


def audit_reads(command: click.Command) -> None:
    """Every command of the tree under ``command`` is one read for the ledger's access
    audit (``ledger access``): its path (``runs``, ``ledger access``) and the pipeline
    its NAME argument names. A command that asks the ledger nothing records nothing."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            audit_reads(sub)
        return
    callback = command.callback
    if callback is None:
        return

    @functools.wraps(callback)
    def read(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        what, name = _command_words(ctx), ctx.params.get("name")
        with api.accessing(what, via="cli", pipeline=name if isinstance(name, str) else None):
            return callback(*args, **kwargs)

    command.callback = read


def _command_words(ctx: click.Context) -> str:
    """``ledger access``: the command's words after the program's name, however it was
    started (``pipeledger``, ``python -m pipeledger``)."""
    words: list[str] = []
    while ctx.parent is not None:
        words.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(words)


@click.group(
    "pipeledger",
    cls=_Group,
    context_settings={"max_content_width": 100},
    no_args_is_help=True,
    params=global_options(),
)
def app() -> None:
    """Idempotent, incremental loads with watermarks that commit with the rows."""


def json_option(command: F) -> F:
    """``--json``: print one machine-readable JSON document (the ``as_json`` parameter)."""
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(
        command
    )


def since_option(command: F) -> F:
    return click.option("--since", help="A duration back from now (7d, 12h) or an ISO time.")(
        command
    )


def positive(name: str, help: str) -> Callable[[F], F]:
    """An optional integer option of at least 1."""
    return click.option(name, type=click.IntRange(min=1), help=help)


def fail(code: int) -> click.exceptions.Exit:
    """The exception that ends a command with exit ``code`` (raise it)."""
    return click.exceptions.Exit(code)


def exit_code_of(exc: BaseException) -> int:
    return exc.exit_code if isinstance(exc, PipeledgerError) else 1


def _traceback(exc: BaseException) -> str:
    import traceback  # --debug only

    return redact("".join(traceback.format_exception(exc)))


def print_error(exc: BaseException) -> None:
    if OPTIONS.debug:
        err.print(_traceback(exc), markup=False)
    kind = "error" if isinstance(exc, PipeledgerError) else f"unexpected {type(exc).__name__}"
    notes = [redact(note) for note in getattr(exc, "__notes__", [])]
    print_message(kind, redact(str(exc)), notes)


def print_message(kind: str, message: str, notes: Sequence[str] = ()) -> None:
    """``kind: message`` in red on stderr, then each note (what happens next) below it."""
    err.print(f"[bold red]{kind}:[/] ", end="")
    err.print(message, markup=False, soft_wrap=True, highlight=False)
    for note in notes:
        err.print(note, markup=False, soft_wrap=True, highlight=False)


def error_json(exc: BaseException) -> dict[str, Any]:
    """The one JSON document a command prints when it fails before it has results."""
    notes = [redact(note) for note in getattr(exc, "__notes__", [])]
    return {
        "status": "failed",
        "error": " ".join([redact(str(exc) or type(exc).__name__), *notes]),
        "error_type": type(exc).__name__,
        "exit_code": exit_code_of(exc),
    }


def usage_error_json(exc: click.ClickException) -> dict[str, Any]:
    """The JSON document of a command line the parser refused (exit 2)."""
    usage = exc.exit_code == 2
    return {
        "status": "failed",
        "error": redact(exc.format_message()),
        "error_type": "UsageError" if usage else type(exc).__name__,
        "exit_code": exc.exit_code,
    }


@contextmanager
def reporting(as_json: bool = False) -> Iterator[None]:
    """Any error ends the command with its exit code: printed on stderr, and with
    ``--json`` also as one JSON document on stdout (stdout stays valid JSON)."""
    try:
        yield
    except click.exceptions.Exit:
        raise
    except Exception as exc:
        print_error(exc)
        if as_json:
            print_json(error_json(exc))
        raise fail(exit_code_of(exc)) from None


def read_config() -> api.Config:
    """The validated config (pydantic: only for commands that run something)."""
    return api.load_config(OPTIONS.config_path)


def locate() -> api.Located:
    """Where the warehouse and the ledger are, without validating the rest of the config:
    what the commands that only read state or the ledger need (no pydantic)."""
    return api.locate(OPTIONS.config_path)


def print_json(payload: Any) -> None:
    """One JSON document on stdout, masked as every output is (a password that reached the
    ledger through a writer of its own is not printed either)."""
    sys.stdout.write(redact(json.dumps(payload, indent=2, default=str)) + "\n")
    sys.stdout.flush()


def print_failure(failure: api.RunFailure) -> None:
    if OPTIONS.debug and failure.cause is not None:
        err.print(_traceback(failure.cause), markup=False)
    kind = f"unexpected {failure.unexpected}" if failure.unexpected else "error"
    if failure.status == "skipped":
        kind = "skipped"
    print_message(kind, failure.error, failure.notes)


def print_outcome(outcome: api.Outcome) -> None:
    """One outcome in words: its lines, or its error and what happens next."""
    from pipeledger.cli.render import model_lines, result_lines

    if isinstance(outcome, api.RunFailure):
        print_failure(outcome)
        return
    lines = result_lines(outcome) if isinstance(outcome, api.LoadResult) else model_lines(outcome)
    out.lines(lines)
    if outcome.ledger_error:  # committed, but not recorded (exit 5)
        print_message("error", outcome.ledger_error)


def report_scheduled(outcomes: Sequence[api.ScheduledOutcome], as_json: bool) -> None:
    if as_json:
        print_json([o.to_json() for o in outcomes])
        return
    if not outcomes:
        out.print("nothing is due")
    for scheduled in outcomes:
        interval = scheduled.interval
        when = "schedule"  # it could not be read: no interval
        if interval is not None:
            when = f"interval {interval.start.isoformat()} .. {interval.end.isoformat()}"
        out.print(
            f"[bold]{scheduled.node}[/] {when}",
            soft_wrap=True,
            highlight=False,
        )
        print_outcome(scheduled.outcome)


@contextmanager
def cancellable() -> Iterator[None]:
    """SIGTERM and Ctrl-C cancel the run: its transaction rolls back, the ledger says
    ``cancelled``, and the exit code is 130 (SIGINT) or 143 (SIGTERM). No run starts
    after the signal, even if a cleanup that fails loses its exception (api.terminating)."""
    import signal

    from pipeledger.api import RunCancelled, terminating

    with terminating() as terminate:

        def on_sigterm(signum: int, frame: object) -> None:
            terminate()
            raise RunCancelled("terminated by SIGTERM")

        def on_sigint(signum: int, frame: object) -> None:
            terminate()
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, on_sigterm)
        previous_int = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        except (KeyboardInterrupt, RunCancelled) as exc:
            code = 143 if isinstance(exc, RunCancelled) else 130
            err.print("[bold red]cancelled:[/] the run was rolled back; nothing was written")
            raise fail(code) from None
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
