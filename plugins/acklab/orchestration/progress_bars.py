"""Rich progress bars for the CLI: one bar per scenario group (messages sent of planned), with
acked and failed counts and the send rate."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class LoadBars:
    """A `acklab.workload.producer.Progress`: the totals restart from 0 at every group."""

    def __init__(self, groups: list[tuple[str, int]], console: Console) -> None:
        """`groups`: (label, messages planned) per group, in run order."""
        self._groups = groups
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("acked {task.fields[acked]:,} failed {task.fields[failed]:,}"),
            TextColumn("{task.fields[rate]:,.0f} msg/s"), TimeElapsedColumn(),
            console=console, transient=False,
        )
        self._task: TaskID | None = None
        self._group = -1
        self._last_sent = 0

    def __enter__(self) -> LoadBars:
        self._progress.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._progress.stop()

    def __call__(self, sent: int, acked: int, failed: int) -> None:
        if self._task is None or sent < self._last_sent:
            self._group += 1
            label, total = self._groups[self._group] if self._group < len(self._groups) else ("?", None)
            description = f"{self._group + 1}/{len(self._groups)} {label}"
            self._task = self._progress.add_task(description, total=total, acked=0, failed=0, rate=0.0)
        task = self._progress.tasks[self._task]
        self._progress.update(self._task, completed=sent, acked=acked, failed=failed, rate=task.speed or 0.0)
        self._last_sent = sent
