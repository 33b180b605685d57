"""Progress of long work: a bar per study on a terminal, one line per measurement otherwise."""

from __future__ import annotations


from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .stats import format_number


class ProgressReporter:
    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._bar: Progress | None = None
        self._task = None
        self.done = self.total = 0

    def log(self, message: str) -> None:
        self.console.print(f"[dim]·[/dim] {message}", highlight=False, emoji=False)

    def start(self, study: str, total: int, done: int) -> None:
        self.total, self.done = total, done
        if done:
            self.log(f"{study}: {done} of {total} measurements already stored, measuring the rest")
        if self.live:
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("cases x rounds"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=self.console, transient=False)
            self._bar.start()
            self._task = self._bar.add_task(study, total=total, completed=done)

    def measured(self, case_id: str, round_no: int, headline: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1)
        else:
            # emoji=False: a case id is data (':100:' in 'ro:fdw_external:1:0ms:15:simple:100' is no emoji)
            self.console.print(f"[{self.done}/{self.total}] round {round_no} {case_id}: {headline}",
                               highlight=False, emoji=False)

    def skipped(self, n: int) -> None:
        """n measurements the run will not make after all (cases converged: --until-ci)."""
        self.total -= n
        if self._bar is not None:
            self._bar.update(self._task, total=self.total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def headline(metrics: dict | None, error: str | None, primary: str) -> str:
    """The study's primary metric of one measurement (with the latency when it is TPS)."""
    if error:
        return f"FAILED: {error}"
    shown = [f"{k}={format_number(float(metrics[k]))}" for k in dict.fromkeys((primary, "latency_ms"))
             if isinstance((metrics or {}).get(k), (int, float))]
    return " ".join(shown) or "ok"
