"""This machine's record of the hosts a run made something on (issue 47, `--place`), so that
`clean` reaches them after a SIGKILL: one entry per run and host (its SSH destination, the key it
logged in with, the ssh config it read, the run's directory there), added before anything is made there and forgotten once
that directory is gone. What is made there is listed by the host's own ledger (remote_scripts.py).
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

from .. import scratch
from ..errors import UserError
from . import remote_scripts as scripts
from .hosts import Connection, HostSpec, SshSettings
from .ledger import locked_entries

FILE = "host-objects.json"


class HostLedger:
    def __init__(self, root: Path):
        self.root = root
        self.path = root / FILE

    def entries(self, run_id: str | None = None) -> list[dict]:
        if not self.path.exists():
            return []
        with locked_entries(self.path) as entries:
            return [e for e in entries if run_id is None or e["run_id"] == run_id]

    def add(self, run_id: str, connection: Connection, directory: str) -> None:
        identity, config = connection.settings.identity, connection.settings.config
        with locked_entries(self.path) as entries:
            entries[:] = [e for e in entries if (e["run_id"], e["host"]) != (run_id, connection.spec.name)]
            entries.append({"run_id": run_id, "host": connection.spec.name,
                            "destination": connection.spec.destination, "dir": directory,
                            "identity": str(identity) if identity else None,
                            "ssh_config": str(config) if config else None,
                            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})

    def forget(self, run_id: str, host: str) -> None:
        with locked_entries(self.path) as entries:
            entries[:] = [e for e in entries if (e["run_id"], e["host"]) != (run_id, host)]

    def clean(self, run_id: str) -> tuple[list[str], list[str]]:
        """What a run left on each host of its entries, removed by the host's ledger: (what was done,
        one line per host that could not be reached, which keeps its entry for a later clean)."""
        said, unreached = [], []
        mine = self.entries(run_id)
        if not mine:
            return said, unreached
        control_dir = scratch.make_dir("ssh", scratch.tmpfs_or_tmp())
        try:
            for entry in mine:
                spec = HostSpec(entry["host"], entry["destination"])
                identity, config = (Path(entry[k]) if entry.get(k) else None for k in ("identity", "ssh_config"))
                connection = Connection(spec, SshSettings(self.root, identity, config=config), control_dir)
                try:
                    connection.open()
                    res = connection.run(scripts.cleanup(spec.name, entry["dir"]))
                except (UserError, subprocess.TimeoutExpired) as e:
                    unreached.append(f"host {spec.name} ({spec.shown}): could not reach it to remove run {run_id}'s "
                                     f"{entry['dir']} ({e}); run clean again when it is up")
                    continue
                finally:
                    connection.close()
                if res.returncode != 0:
                    unreached.append(f"host {spec.name}: removing run {run_id}'s {entry['dir']} failed there "
                                     f"({(res.stderr.strip().splitlines() or ['exit ' + str(res.returncode)])[-1]})")
                    continue
                said += [f"host {spec.name}: {line}" for line in res.stdout.splitlines() if line.strip()]
                self.forget(run_id, spec.name)
        finally:
            for entry in control_dir.iterdir():
                entry.unlink(missing_ok=True)
            control_dir.rmdir()
        return said, unreached
