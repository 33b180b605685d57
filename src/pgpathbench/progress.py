"""Progress of long work: a bar per study on a terminal, one line per measurement otherwise."""

from __future__ import annotations

import statistics
import time
from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .stats import format_number


class ProgressReporter:
    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._bar: Progress | None = None
        self._task = None
        self.done = self.total = 0
        self.plan: Counter[str] = Counter()     # case id -> measurements still to make
        self.took: dict[str, float] = {}         # case id -> wall seconds of its last measurement
        self._mark = time.monotonic()

    def log(self, message: str) -> None:
        self.console.print(f"[dim]·[/dim] {message}", highlight=False, emoji=False)

    def start(self, study: str, total: int, done: int, plan: list[str] | None = None) -> None:
        """plan: the case id of every measurement still to make (for the ETA)."""
        self.total, self.done = total, done
        self.plan, self.took, self._mark = Counter(plan or ()), {}, time.monotonic()
        if done:
            self.log(f"{study}: {done} of {total} measurements already stored, measuring the rest")
        if self.live:
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("cases x rounds"), TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
                                 console=self.console, transient=False)
            self._bar.start()
            self._task = self._bar.add_task(study, total=total, completed=done, eta="after the first measurement")

    def measured(self, case_id: str, round_no: int, headline: str) -> None:
        """One measurement made: its wall time since the previous one (probes between rounds
        included: they are part of what the rest will take) is its case's time."""
        now = time.monotonic()
        self.took[case_id], self._mark = now - self._mark, now
        self.done += 1
        self.plan[case_id] -= 1
        eta = format_duration(self.remaining_s())
        if self._bar is not None:
            self._bar.update(self._task, advance=1, eta=eta)
        else:
            # emoji=False: a case id is data (':100:' in 'ro:fdw_external:1:0ms:15:simple:100' is no emoji)
            self.console.print(f"[{self.done}/{self.total}] round {round_no} {case_id}: {headline} (ETA {eta})",
                               highlight=False, emoji=False)

    def remaining_s(self) -> float | None:
        """What the measurements still planned will take: each case's last measurement's time (a
        case not measured yet: the median of those that were); None before any was."""
        if not self.took:
            return None
        typical = statistics.median(self.took.values())
        return sum(n * self.took.get(case, typical) for case, n in self.plan.items() if n > 0)

    def closed(self, case_ids) -> None:
        """Cases the run measures no more (converged: --until-ci): their planned measurements go."""
        for case in case_ids:
            self.total -= max(self.plan.pop(case, 0), 0)
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


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"
