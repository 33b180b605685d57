"""Maven run for a PostgreSQL bundle (binaries.py): in its own session, ended with us, bounded in
time; and its failure read as one line naming --pg and the fix."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
from pathlib import Path

from typing import Protocol

from ..errors import UserError

TIMEOUT_S = 900
PR_SET_PDEATHSIG = 1
# Debian's own major: the bundles' client tools (they have none) and the fallback every refusal names.
DEBIAN_CLIENT_MAJOR = 15


class Artifact(Protocol):
    """What an error here names of the bundle being fetched (binaries.Bundle)."""
    version: str

    @property
    def major(self) -> int: ...

    @property
    def server_version(self) -> str: ...

    @property
    def coordinates(self) -> str: ...


def _die_with_us() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # we died between fork and prctl
        os.kill(os.getpid(), signal.SIGKILL)


def run(args: list[str], bundle: Artifact, cwd: Path) -> subprocess.CompletedProcess:
    # Its own session, so a terminal's Ctrl-C reaches only us; we then end it (and its JVM), and
    # PDEATHSIG ends it should we be killed outright.
    try:
        proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=_die_with_us)
    except FileNotFoundError:
        raise UserError(f"--pg: PostgreSQL {bundle.major} is fetched from Maven Central with Maven, and "
                        f"'{args[0]}' is not installed; apt-get install -y maven, or use --pg {DEBIAN_CLIENT_MAJOR}") from None
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise UserError(f"--pg: Maven did not fetch PostgreSQL {bundle.version} within {TIMEOUT_S} s; "
                        f"check the network to Maven Central, or use --pg {DEBIAN_CLIENT_MAJOR}") from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def maven_error(bundle: Artifact, output: str) -> str:
    """Maven's failure -> one line naming --pg and the fix."""
    text = _ANSI.sub("", output)
    errors = [line[len("[ERROR]"):].strip() for line in text.splitlines() if line.startswith("[ERROR]")]
    first = next((e for e in errors if e), text.strip().splitlines()[-1] if text.strip() else "no output")
    fallback = f"or use --pg {DEBIAN_CLIENT_MAJOR}"
    if "Checksum validation failed" in text:
        return (f"--pg: the download of {bundle.coordinates} failed its SHA-1 check; retry, and if it "
                f"persists check the proxy or mirror in ~/.m2/settings.xml, {fallback}")
    if "Could not find artifact" in text:
        return (f"--pg: {bundle.coordinates} is not on Maven Central (or the configured mirror); "
                f"check ~/.m2/settings.xml, {fallback}")
    if "offline mode" in text:
        return f"--pg: Maven is set to offline mode and has not got {bundle.coordinates} yet; turn offline off, {fallback}"
    network = ("Could not transfer", "Unknown host", "Connection refused", "timed out", "Network is unreachable",
               "transfer failed", "Could not resolve", "No route to host", "could not be resolved")
    if any(n in text for n in network):
        reason = re.search(r"(Unknown host [^:\s]+|Connection refused|[Cc]onnect(ion)? timed out|"
                           r"Network is unreachable|No route to host)", text)
        why = f" ({reason.group(0)})" if reason else ""
        return (f"--pg: Maven cannot reach Maven Central to fetch PostgreSQL {bundle.server_version}{why}; "
                f"check the network or the proxy in ~/.m2/settings.xml, {fallback}")
    first = re.sub(r"\s*->\s*\[Help 1\]\s*$", "", first)
    return f"--pg: Maven could not fetch {bundle.coordinates}: {first[:300]}; {fallback}"
