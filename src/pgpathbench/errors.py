"""The kinds of failure a user can see.

UserError is a user's mistake (bad option, missing binary, unreachable DSN): the CLI prints
its one line and exits 2. CaseError is one measurement that failed: the runner records it and
goes on. ServerRefused is PostgreSQL's refusal relayed by one of its tools (pgbench -i, psql),
or a managed server that initdb or its start could not bring up: like a psycopg error, no bug of
ours. RunFailed is a run that ended with failed measurements, or a command that stopped because a
server died or refused: one line, exit 1. Anything else is a bug and keeps its traceback.
"""


def reason(e: BaseException) -> str:
    """A one-line reason for a failure: its type and the first line of its message."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}"[:300] if text else type(e).__name__


class UserError(Exception):
    """One line that names the option (or thing) at fault and says how to fix it."""


class CaseError(Exception):
    """One repeat of one case failed; the message is stored with the measurement."""


class ServerRefused(Exception):
    """A PostgreSQL tool we ran (pgbench -i, psql) failed on what the server answered: a role's
    statement_timeout, a full disk, a missing privilege; or initdb or a postmaster that failed (killed
    by the OOM killer). The message is the tool's error line, or what happened and what to do."""

    @classmethod
    def of(cls, what: str, stderr: str, returncode: int) -> "ServerRefused":
        """`what` failed: with the tool's last error line ('pgbench: error: ...'), spaces collapsed."""
        lines = [" ".join(line.split()) for line in stderr.splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()] or lines
        return cls(f"{what} failed: {errors[-1] if errors else f'exit {returncode}'}"[:300])


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: stop, clean up, keep what was measured."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class RunFailed(Exception):
    """A run ended without every measurement: some failed, or a server died and the run stopped.
    One line (what happened, and how to measure the rest), exit 1; what was measured is kept."""
