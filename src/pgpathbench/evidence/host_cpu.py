"""A server's process-group CPU read on the host it runs on, over that host's open SSH connection.

The same total as proc_cpu.group_ticks (the postmaster's utime+stime+cutime+cstime plus its live
children's, the parent read before and after the listing and the whole read again when its
cutime/cstime moved meanwhile), computed there by one POSIX sh/awk script sent on ssh's stdin:
one round trip a reading, no Python assumed on the host. The ticks are the host's: its CLK_TCK
(getconf, read once per connection) converts them.
"""

from __future__ import annotations

import shlex
import subprocess
import threading
import weakref
from typing import Iterable, Protocol

READ_TIMEOUT_S = 10.0   # a reading over a stalled connection must not hang the measurement
WAIT_POLLS = 250        # how often a reading checks that a backend of ours has gone, 2 ms apart
RETRIES = 5             # proc_cpu's

# Parameters first (shell assignments), then this. awk's getline (-1 for a file that cannot be
# opened) tolerates a process that exits while we read; the fields after comm are those after
# the last ") " of its stat's last line, whatever comm holds (spaces, parentheses, a newline).
SCRIPT = r"""
export LC_ALL=C
n=0
while [ -n "$wait" ] && [ -e "$proc/$wait" ] && [ "$n" -lt "$polls" ]; do sleep 0.002; n=$((n + 1)); done
exec awk -v proc="$proc" -v pid="$pid" -v skip="$skip" -v retries="$retries" '
function stat(p,    f, line, last) {
    f = proc "/" p "/stat"; last = ""
    while ((getline line < f) > 0) last = line
    close(f)
    if (!sub(/.*\) /, "", last)) return 0
    return split(last, F, " ") >= 15
}
function kids(    f, line, cmd) {
    f = proc "/" pid "/task/" pid "/children"; line = ""
    if ((getline line < f) >= 0) { close(f); return split(line, K, " ") }
    cmd = "cd \"" proc "\" && echo [0-9]*"
    cmd | getline line; close(cmd)
    return split(line, K, " ")
}
BEGIN {
    split(skip, S, " "); for (i in S) skipped[S[i]] = 1
    for (try = 1; try <= retries; try++) {
        if (!stat(pid)) { print "gone"; exit 0 }
        cu = F[14]; cs = F[15]; usr = F[12] + F[14]; sys = F[13] + F[15]
        n = kids()
        for (i = 1; i <= n; i++)
            if (!(K[i] in skipped) && K[i] != pid && stat(K[i]) && F[2] == pid) {
                usr += F[12] + F[14]; sys += F[13] + F[15]
            }
        if (stat(pid) && F[14] == cu && F[15] == cs) break
    }
    printf "ticks %.0f %.0f\n", usr, sys
}'
"""


class Host(Protocol):
    """What a reading needs of a host: servers.hosts.Connection's run()."""

    def run(self, script: str, timeout: float = ...) -> subprocess.CompletedProcess: ...


def reading_script(pid: int, exclude: Iterable[int] = (), wait_gone: int | None = None,
                   proc: str = "/proc") -> str:
    """The script of one reading: the group of `pid` but the live children in `exclude`, once
    `wait_gone` (a backend of ours) has left /proc or WAIT_POLLS polls have passed."""
    params = {"proc": proc, "pid": int(pid), "skip": " ".join(str(int(p)) for p in exclude),
              "wait": "" if wait_gone is None else int(wait_gone), "polls": WAIT_POLLS, "retries": RETRIES}
    return "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in params.items()) + SCRIPT


def parse_reading(stdout: str, pid: int) -> tuple[int, int]:
    """(user, system) ticks from the script's output; ProcessLookupError when pid was gone."""
    words = stdout.split()
    if words == ["gone"]:
        raise ProcessLookupError(f"process {pid} not visible in the host's /proc")
    if len(words) != 3 or words[0] != "ticks" or not all(w.isdigit() for w in words[1:]):
        raise ValueError(f"unexpected CPU reading from the host: {stdout.strip()[:80]!r}")
    return int(words[1]), int(words[2])


def _run(host: Host, script: str, what: str) -> str:
    res = host.run(script, timeout=READ_TIMEOUT_S)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        raise RuntimeError(f"{what} on the host failed: {last}")
    return res.stdout


def group_ticks(host: Host, pid: int, exclude: Iterable[int] = (), wait_gone: int | None = None) \
        -> tuple[int, int]:
    """(user, system) ticks of pid's process group on the host, in one round trip (see
    reading_script). Raises ProcessLookupError when pid is not in the host's /proc, RuntimeError
    (or subprocess.TimeoutExpired) when the host did not answer."""
    return parse_reading(_run(host, reading_script(pid, exclude, wait_gone), "reading CPU"), pid)


def backend_ticks(host: Host, pid: int) -> tuple[int, int] | None:
    """One backend's CPU (it has no children), or None when it cannot be read: the wait-event
    sampler's own, left out of its server's figure."""
    try:
        return group_ticks(host, pid)
    except Exception:
        return None


_clk_tck: dict[int, tuple[weakref.ref, int]] = {}   # id(connection) -> (the connection, its CLK_TCK)
_clk_lock = threading.Lock()


def clk_tck(host: Host) -> int:
    """The host's clock ticks a second (getconf CLK_TCK), read once per connection."""
    with _clk_lock:
        known = _clk_tck.get(id(host))
        if known is not None and known[0]() is host:
            return known[1]
    text = _run(host, "getconf CLK_TCK\n", "getconf CLK_TCK").strip()
    if not text.isdigit() or int(text) == 0:
        raise ValueError(f"getconf CLK_TCK on the host said {text[:40]!r}")
    with _clk_lock:
        for key in [k for k, (ref, _) in _clk_tck.items() if ref() is None]:
            del _clk_tck[key]   # connections gone
        _clk_tck[id(host)] = (weakref.ref(host), int(text))
    return int(text)
