"""Progress of long work: a bar per study on a terminal, one line per measurement otherwise.

The ETA counts what repeats (bench/round_costs.py splits a round into its parts): each planned
measurement at its case's last measurement's own time (settings, evidence, the measurement, the
store's write), and each round to come at the last round's own cost beside its measurements
(link probes before and after it, deciding which cases it measures). Probes are no case's: charged
to whichever case a round began with, they would leave the estimate when that case converges, and
a round's closing probes would be missed until the next round began.
"""

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
        self.plan: Counter[tuple[int, str]] = Counter()   # (round, case id) -> measurements still to make
        self.took: dict[str, float] = {}         # case id -> seconds of its last measurement itself
        self.per_round: float | None = None      # the last round's own cost beside its measurements
        self._round: int | None = None           # the round under way (its own cost still to come)
        self._mark = time.monotonic()            # when the round under way began (the last one ended)
        self._measured_s = 0.0                   # its measurements' seconds so far

    def log(self, message: str) -> None:
        self.console.print(f"[dim]·[/dim] {message}", highlight=False, emoji=False)

    def start(self, study: str, total: int, done: int, plan: list[tuple[int, str]] | None = None,
              known: dict[str, float] | None = None) -> None:
        """plan: (round, case id) of every measurement still to make (for the ETA); known: case id ->
        a measurement's time from before (a resumed run's own): the ETA's until the case is measured
        here, so that a resumed run's ETA does not take its slow cases at the fast ones' time."""
        self.total, self.done = total, done
        self.plan, self.took, self.per_round = Counter(plan or ()), dict(known or {}), None
        self._round, self._mark, self._measured_s = None, time.monotonic(), 0.0
        if done:
            self.log(f"{study}: {done} of {total} measurements already stored, measuring the rest")
        if self.live:
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("cases x rounds"), TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
                                 console=self.console, transient=False)
            self._bar.start()
            self._task = self._bar.add_task(study, total=total, completed=done, eta="after the first measurement")

    def measured(self, case_id: str, round_no: int, headline: str, seconds: float) -> None:
        """One measurement made, in `seconds` of its own: its case's time from now on."""
        self.took[case_id], self._round = seconds, round_no
        self._measured_s += seconds
        self.done += 1
        self.plan[(round_no, case_id)] -= 1
        # a case not measured yet counts at the others' median: say how many do, a guess until they are
        untimed = self.untimed()
        guessed = f", {untimed} case{'s' * (untimed > 1)} not timed yet" if untimed else ""
        eta = format_duration(self.remaining_s()) + guessed
        if self._bar is not None:
            self._bar.update(self._task, advance=1, eta=eta)
        else:
            # emoji=False: a case id is data (':100:' in 'ro:fdw_external:1:0ms:15:simple:100' is no emoji)
            self.console.print(f"[{self.done}/{self.total}] round {round_no} {case_id}: {headline} (ETA {eta})",
                               highlight=False, emoji=False, soft_wrap=True)   # one line, however long

    def round_done(self) -> None:
        """The round under way ended (its closing probes included): what it cost beside its
        measurements is the cost of each round to come."""
        now = time.monotonic()
        self.per_round = max(0.0, now - self._mark - self._measured_s)
        self._round, self._mark, self._measured_s = None, now, 0.0

    def remaining_s(self) -> float | None:
        """What the measurements still planned will take: each case's last measurement's time (a
        case not measured yet: the median of those that were), and each round with measurements
        planned, and the one under way, at the last round's own cost; None before any measurement."""
        if not self.took:
            return None
        typical = statistics.median(self.took.values())
        left = [(r, case) for (r, case), n in self.plan.items() for _ in range(n)]
        rounds = {r for r, _ in left} | ({self._round} if self._round is not None else set())
        return sum(self.took.get(case, typical) for _, case in left) + len(rounds) * (self.per_round or 0.0)

    def untimed(self) -> int:
        """How many cases still planned have no measurement's time yet (theirs is a guess)."""
        return len({case for (_, case), n in self.plan.items() if n > 0 and case not in self.took})

    def closed(self, case_ids) -> None:
        """Cases the run measures no more (converged: --until-ci): their planned measurements go."""
        closed = set(case_ids)
        for key in [k for k in self.plan if k[1] in closed]:
            self.total -= max(self.plan.pop(key), 0)
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
