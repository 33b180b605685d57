"""A PostgreSQL server started on a test host over its SSH connection, by its login (tests/hosts.py).

    with HostPostgres(conn, host, here=lan.root_address, bindir=..., root=tmp) as pg:
        pg.postmaster, pg.connect(), pg.passfile ...

Not the tool's placing (issue 47's --place builds that): a bare cluster in the login's home for
what must run where a server runs there (its CPU read over SSH). It listens on the host's LAN
address for `here` (this machine's end of the LAN) only, with a generated password that reaches
the host inside a script on ssh's stdin and this machine's clients in a 0600 passfile: never on a
command line. Leaving stops it (immediate) and removes its directory there.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import psycopg

PORT = 5432
USER = "bench"
DATA = '"$HOME/pgpb-host-pg"'


class HostPostgres:
    def __init__(self, conn, host, here: str, bindir: Path, root: Path):
        self.conn, self.host, self.here, self.bindir = conn, host, here, Path(bindir)
        self.password = secrets.token_urlsafe(18)
        self.passfile = Path(root) / "host-pgpass"
        self.postmaster: int | None = None

    @property
    def address(self) -> str:
        return self.host.address

    def __enter__(self) -> "HostPostgres":
        self.passfile.write_text(f"{self.address}:{PORT}:*:{USER}:{self.password}\n")
        self.passfile.chmod(0o600)
        script = f"""set -e
umask 077
cat > "$HOME/pw" <<'EOF'
{self.password}
EOF
'{self.bindir}/initdb' -D {DATA} -U {USER} --pwfile="$HOME/pw" -A scram-sha-256 -E UTF8 --locale=C -N >/dev/null
rm "$HOME/pw"
echo 'host all {USER} {self.here}/32 scram-sha-256' >> {DATA}/pg_hba.conf
'{self.bindir}/pg_ctl' -D {DATA} -l {DATA}/log -w \\
  -o "-c listen_addresses={self.address} -p {PORT} -k /tmp -c autovacuum=off" start >/dev/null
head -n 1 {DATA}/postmaster.pid
"""
        try:
            self.postmaster = int(self.conn.output(script, "starting PostgreSQL"))
        except BaseException:
            self.__exit__()
            raise
        return self

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(host=self.address, port=PORT, user=USER, dbname=dbname, passfile=str(self.passfile),
                               autocommit=True)

    def __exit__(self, *exc) -> None:
        self.conn.run(f"[ -d {DATA} ] && '{self.bindir}/pg_ctl' -D {DATA} -m immediate -w stop >/dev/null; "
                      f"rm -rf {DATA} \"$HOME/pw\"")
        self.passfile.unlink(missing_ok=True)
