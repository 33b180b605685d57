"""The kinds of failure a user can see.

UserError is a user's mistake (bad option, missing binary, unreachable DSN): the CLI prints
its one line and exits 2. CaseError is one measurement that failed: the runner records it and
goes on. RunFailed is a run that ended with failed measurements, or stopped because a server
died: one line, exit 1. Anything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """One line that names the option (or thing) at fault and says how to fix it."""


class CaseError(Exception):
    """One repeat of one case failed; the message is stored with the measurement."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: stop, clean up, keep what was measured."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class RunFailed(Exception):
    """A run ended without every measurement: some failed, or a server died and the run stopped.
    One line (what happened, and how to measure the rest), exit 1; what was measured is kept."""
