"""Shared by the `acklab` commands: the console, how a user's mistake and a failed run end,
and how a run's result is printed."""

from __future__ import annotations

import logging
import os
import tempfile
import traceback
from collections.abc import Callable
from enum import IntEnum
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from acklab.base import maven
from acklab.base.paths import runs_dir
from acklab.base.spec import SpecError
from acklab.model import beliefs
from acklab.plan.params import RunParams
from acklab.plan.presets import describe as describe_claim
from acklab.store.runs import RunDir

console = Console(stderr=True, soft_wrap=True)
DEFAULTS = RunParams()
MATRIX_COLUMNS = ("scenario", "guarantee", "planned", "sent", "acked", "failed", "unknown", "lost", "duplicates", "reordered")
T = TypeVar("T")


class ExitCode(IntEnum):
    """What `acklab run` exits with, one code per outcome, for a CI step to branch on (docs/reference.md)."""

    PASS = 0  # every row passed and every negative control was caught
    FAIL = 1  # a documented guarantee broken (a red row)
    BAD_INPUT = 2  # the user's mistake, refused in one line before any broker starts
    INCOMPLETE = 3  # no red row, but some row's evidence is short or its fault took no effect
    INVALID = 4  # a negative control was not caught exactly: no verdict of the run can be trusted
    ERROR = 5  # no verdict at all: the run itself failed (a cluster that would not start, a full disk, a crash)

    @classmethod
    def of(cls, status: str) -> ExitCode:
        """The code of a run's or a comparison's status (`acklab.checker.verdict.Status`)."""
        return {"pass": cls.PASS, "fail": cls.FAIL, "incomplete": cls.INCOMPLETE, "invalid": cls.INVALID}[status]


class UserError(Exception):
    """A mistake in what the user asked for: one line, exit code 2."""


def user_errors(action: Callable[[], T]) -> T:
    """Run `action`; a user's mistake becomes one line on stderr and exit code 2."""
    try:
        return action()
    except (SpecError, maven.SetupError, UserError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)  # the message's brackets are text, not markup
        raise typer.Exit(ExitCode.BAD_INPUT) from None


def run_failures(action: Callable[[], T]) -> T:
    """Run `action`; a run that fails (a full disk, a cluster that would not start, a producer that
    died...) is one line on stderr with where its traceback went, and `ExitCode.ERROR`: no verdict."""
    try:
        return action()
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as exc:  # every failure of a run ends it the same way
        raise typer.Exit(report_crash(exc, "the run failed, no verdict")) from None


def report_crash(exc: BaseException, what: str) -> ExitCode:
    """One line on stderr naming `exc` and the file its traceback went to; `ExitCode.ERROR`."""
    trace = Path(tempfile.mkstemp(prefix="acklab-run-failure-", suffix=".log")[1])
    trace.write_text("".join(traceback.format_exception(exc)))
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    console.print(f"[red]error:[/red] {what} ({type(exc).__name__}: {escape(first)}); traceback: {trace}", highlight=False)
    return ExitCode.ERROR


def writable_runs() -> None:
    """The run store must be a writable folder (created if missing)."""
    root = runs_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"ACKLAB_RUNS={root}: cannot create the run store ({exc.strerror})") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise UserError(f"ACKLAB_RUNS={root}: the run store is not writable")


def writable_file(path: Path, option: str) -> None:
    """UserError unless `path` can be written: its folder exists and is writable, and it is not a folder."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UserError(f"{option} {path}: is a folder; give a file path")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: its folder {folder} does not exist or is not writable")


def print_result(run: RunDir, result: dict[str, Any], err: bool = False, control: bool = True) -> None:
    """The matrix as a table with each scenario's verdict, then (if `control`) what the negative
    control showed, the status and the paths (on stderr if `err`: stdout is then kept for one JSON
    document)."""
    from functools import partial

    from rich.table import Table

    echo = partial(typer.echo, err=err)
    caught = "NOT caught" if result["status"] == "invalid" else "caught"  # the negative control's row
    table = Table(*MATRIX_COLUMNS, "verdict", title="delivery matrix")
    for row in run.read_matrix():
        table.add_row(*(str(row.get(c)) for c in MATRIX_COLUMNS), result["scenarios"].get(row["scenario"], caught))
    Console(width=160, stderr=err).print(table)
    for regression in result.get("regressions", []):
        echo(f"REGRESSION {regression['scenario']}: {regression['status']} now, passed in green run {regression['last_green_run']}")
    for lost in result.get("unverified", []):
        echo(f"NO LONGER VERIFIED {lost['scenario']}: incomplete now, passed in green run {lost['last_green_run']}")
    for item in result.get("beliefs", []):
        echo(beliefs.describe(item))
    for seen in result.get("observations", []):
        echo(describe_claim(seen))
    for line in result.get("control", []) if control else []:
        echo(line)
    echo(f"status: {result['status']}")
    echo(f"html report: {result['html']}")
    echo(f"matrix: {result['matrix']}")
    echo(f"report: {result['report']}")


def log_to_console(verbose: bool = False) -> None:
    """INFO logging on the console: acklab's (and any library's errors) only, or everything if
    `verbose`. A run also logs everything to its `run.log`."""
    from rich.logging import RichHandler

    shown = RichHandler(console=console, show_path=False)
    if not verbose:
        shown.addFilter(lambda record: record.name.startswith("acklab") or record.levelno >= logging.ERROR)
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[shown])
    logging.getLogger("acklab.rdkafka").setLevel(logging.CRITICAL)
