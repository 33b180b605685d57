"""The POSIX sh scripts a placed server's host runs (remote.py), given on ssh's stdin.

Each is a template: `render` fills its {placeholders} shell-quoted, so that no value is read as
shell. The host's ledger (LEDGER in the run's directory there) has one line per thing made, written
before it is made where it can be: `dir PATH` (a directory we created, outermost first), `user NAME`
(an account we created), `server DATADIR`, `pid PID DATADIR` (a postmaster started), `files DIR`
(files shipped for a server to read, inside the run's directory), `proxy DIR` (a Toxiproxy shipped
there, host_proxy.py: its process is DIR/toxiproxy-server with DIR/config.json). CLEANUP reads it
alone: what `clean` removes after a SIGKILL here is what the host's ledger says.
"""

from __future__ import annotations

import shlex

LEDGER = "ledger"
ACCOUNT = "pgpathbench"   # the servers' account on a host logged into as root
# Exported by every script a run sends (its Connection's prefix, HostWorkspace.prepare), valued the
# host's name and the run's directory: each process a script starts inherits it, so that CLEANUP
# finds what still runs of the run there.
MARKER = "PGPB_RUN"


def exported(host: str, run: str) -> str:
    """The shell that exports the marker of run directory `run` on host `host` (its --host name)."""
    return f"{MARKER}={shlex.quote(f'{host}:{run}')}; export {MARKER}; "


def cleanup(host: str, run: str) -> str:
    """CLEANUP of run directory `run` on host `host`."""
    return render(CLEANUP, run=run, marker=f"{MARKER}={host}:{run}")

# The run's directory on the host, its ledger, the servers' account (a root login only), and where
# the host sees this machine from: $SSH_CONNECTION is "CLIENT CPORT SERVER SPORT".
PREPARE = r"""
set -e
umask 022
run={run}
led="$run/ledger"
made=
d=$run
while [ ! -e "$d" ]; do made="$d
$made"; d=$(dirname "$d"); done
mkdir -p "$run"
chmod 755 "$run"
printf '%s' "$made" | while IFS= read -r m; do [ -z "$m" ] || echo "dir $m" >> "$led"; done
touch "$led"
chmod 600 "$led"
if [ "$(id -u)" = 0 ] && ! id -u {account} >/dev/null 2>&1; then
  echo "user {account}" >> "$led"
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin {account} >&2
fi
echo "connection=$SSH_CONNECTION"
"""

# Ships nothing itself: the bundle comes on ssh's stdin as a tar stream (Connection.send).
UNPACK = "set -e; umask 022; mkdir -p {dest}; tar -xf - -C {dest}; {dest}/bin/postgres --version"

# This machine's tree of PostgreSQL 15 with Citus (servers/citus.py), as UNPACK does a bundle.
UNPACK_TREE = "set -e; umask 022; mkdir -p {dest}; tar -xf - --no-same-owner -C {dest}; {bindir}/postgres --version"

# Files a server reads (file_fdw's), from a tar stream on ssh's stdin into a directory of the run's,
# recorded in the ledger first (they go with the run's directory); prints each file's bytes there.
FILES = """set -e; umask 022; echo "files "{dest} >> {ledger}; mkdir -p {dest}; \
tar -xf - --no-same-owner -C {dest}; cd {dest}; wc -c -- *"""

# initdb as the servers' account, the password from a 0600 file written from this script (on stdin).
INITDB = r"""
set -e
umask 077
dir={dir}
echo "server $dir/data" >> {ledger}
rm -rf "$dir"
mkdir -p "$dir/sock"
cat > "$dir/pw" <<'PGPB_PASSWORD_END'
{password}
PGPB_PASSWORD_END
{chown} "$dir" "$dir/sock" "$dir/pw"
if ! {as_account} {bindir}/initdb -D "$dir/data" -U {superuser} --pwfile="$dir/pw" --auth-local=trust \
    --auth-host=scram-sha-256 -E UTF8 --locale=C --no-sync > "$dir/initdb.log" 2>&1; then
  rm -f "$dir/pw"; tail -n 3 "$dir/initdb.log" >&2; exit 3
fi
rm -f "$dir/pw"
echo "include_if_exists 'pgpathbench.conf'" >> "$dir/data/postgresql.conf"
"""

# Our settings and pg_hba.conf written, then pg_ctl start (it detaches the postmaster from ssh's
# session: its stdin is /dev/null, its output the log); prints the postmaster's pid there.
START = r"""
set -e
umask 077
dir={dir}
cat > "$dir/data/pgpathbench.conf" <<'PGPB_CONF_END'
{conf}
PGPB_CONF_END
cat > "$dir/data/pg_hba.conf" <<'PGPB_HBA_END'
{hba}
PGPB_HBA_END
{chown} "$dir/data/pgpathbench.conf" "$dir/data/pg_hba.conf"
logged=0; [ ! -f "$dir/server.log" ] || logged=$(wc -c < "$dir/server.log")
if {as_account} {bindir}/pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 60 start > /dev/null 2>&1; then
  pid=$(head -n 1 "$dir/data/postmaster.pid")
  echo "pid $pid $dir/data" >> {ledger}
  # one of its addresses' port taken (by a connection from there, even in TIME_WAIT): postgres only warns
  if tail -c +$((logged + 1)) "$dir/server.log" | grep -q "could not create listen socket"; then
    {as_account} {bindir}/pg_ctl -D "$dir/data" -m fast -w -t 60 stop > /dev/null 2>&1 || :
    echo "port in use" >&2; exit 4
  fi
  echo "$pid"
else
  if tail -n 20 "$dir/server.log" | grep -q "could not bind"; then echo "port in use" >&2; exit 4; fi
  tail -n 5 "$dir/server.log" >&2; exit 3
fi
"""

# A line 'name<TAB>its log's last line' when a server's postmaster no longer runs on its host:
# died, or stopped by someone else (ours are checked only while they run); a zombie has ended too
# (an init that reaps late keeps its /proc entry).
GONE = r"""
case "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' /proc/{pid}/status 2>/dev/null)" in ''|Z|X)
  printf '%s\t%s\n' {name} "$(grep -v '^[[:space:]]*$' {log} 2>/dev/null | tail -n 1)" ;;
esac
"""

STOP = r"""
{as_account} {bindir}/pg_ctl -D {data} -m {mode} -w -t 60 stop > /dev/null 2>&1 || :
"""

RELOAD = "{as_account} {bindir}/pg_ctl -D {data} reload > /dev/null"

# The processes of a proxy shipped to the host (its binary, with the config file only it names; a
# runuser above it ends with it): SIGTERM, then SIGKILL after 5 s. A function, for STOP_PROXY and CLEANUP.
KILL_PROXY = r"""
kill_proxy() {{
  for f in $(grep -lsaF -- "$1/config.json" /proc/[0-9]*/cmdline); do   # one grep, not a tr a process
    p=${{f%/cmdline}}
    cmd=$(tr '\0' ' ' < "$f" 2>/dev/null) || continue
    case "$cmd" in "$1/toxiproxy-server "*"$1/config.json"*) ;; *) continue ;; esac
    pid=${{p#/proc/}}
    kill -TERM "$pid" 2>/dev/null || continue
    i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
    kill -KILL "$pid" 2>/dev/null && echo "killed proxy $pid" || echo "stopped proxy $pid"
  done
}}
"""

# A proxy's directory and binary, recorded in the ledger first; the binary comes on ssh's stdin (a
# command: on the host's command line, so paths only); prints its SHA-256 as the host computes it.
SHIP_PROXY = ("set -e; umask 022; echo proxy {dir} >> {ledger}; mkdir -p {dir}; cat > {dir}/toxiproxy-server; "
              "chmod 755 {dir}/toxiproxy-server; sha256sum {dir}/toxiproxy-server")

# Started as the servers' account on the host's loopback, detached from ssh's session (setsid, no
# terminal, its output to its log); its API answers, or the log says why not.
START_PROXY = r"""
set -e
dir={dir}
command -v curl > /dev/null || {{ echo "no curl there, which reaches the proxy's API; install curl" >&2; exit 3; }}
umask 077
echo '[]' > "$dir/config.json"
: > "$dir/proxy.log"
{chown} "$dir/config.json" "$dir/proxy.log"
cd "$dir"
{as_account} env LOG_LEVEL=warn setsid "$dir/toxiproxy-server" -host 127.0.0.1 -port {port} \
  -config "$dir/config.json" < /dev/null >> "$dir/proxy.log" 2>&1 &
i=0
until curl -sf "http://127.0.0.1:{port}/version" > /dev/null 2>&1; do
  if grep -q "address already in use" "$dir/proxy.log"; then echo "port in use" >&2; exit 4; fi
  i=$((i+1)); [ $i -lt 100 ] || {{ tail -n 5 "$dir/proxy.log" >&2; exit 3; }}
  sleep 0.1
done
"""

STOP_PROXY = KILL_PROXY + "kill_proxy {dir}\n"

# One call of the proxy's HTTP API, on the host's loopback; the body (JSON, ours) on curl's stdin.
# Prints the answer, then its HTTP status on a line of its own.
PROXY_API = r"""
curl -sS -X {method} -H 'Content-Type: application/json' --data-binary @- -w '\n%{{http_code}}' \
  "http://127.0.0.1:{port}{path}" <<'PGPB_BODY_END'
{body}
PGPB_BODY_END
"""

# Everything the host's ledger lists: each postmaster still running in its data directory (its
# cwd) gets an immediate shutdown, then SIGKILL; the run's directory goes, then the directories we
# created above it when empty, then an account we created when no other run of ours is there.
CLEANUP = r"""
unset PGPB_RUN   # sent marked as any script: what CLEANUP runs is not the run's to kill
run={run}
led="$run/ledger"
[ -f "$led" ] || {{ echo "nothing"; exit 0; }}
""" + KILL_PROXY + r"""
for d in $(sed -n 's/^proxy //p' "$led"); do kill_proxy "$d"; done
for data in $(sed -n 's/^server //p' "$led"); do
  pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null) || continue
  [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$data" ] || continue
  # initdb's standalone postgres (its lock file too) blocks SIGQUIT: left to the marker's pass below
  grep -qzxsE -- '--(boot|single|check)' "/proc/$pid/cmdline" && continue
  kill -QUIT "$pid" 2>/dev/null
  i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  kill -KILL "$pid" 2>/dev/null && echo "killed $pid" || echo "stopped $pid"
done
# A script of the run whose ssh was cut runs on (an interrupted initdb writes into the directory rm
# removes, and leaves it): each process carrying the run's marker is killed, until none is left;
# only in this shell's mount namespace: namespace hosts (the tests') share one pid namespace. One
# grep reads every environment (-z: its entries end in NUL), test's -ef compares namespaces: no
# process started for each of the host's processes. An initdb's postgres is spared two passes: once
# its initdb is killed its input ends and it exits, freeing its shared memory (killed, its System V
# segment and /dev/shm file stay on the host: seen beside two suites).
pass=0
while [ $pass -lt 5 ]; do
  found=; spared=
  for f in $(grep -lzxsF -- {marker} /proc/[0-9]*/environ); do
    p=${{f%/environ}}
    [ "$p/ns/mnt" -ef /proc/$$/ns/mnt ] || continue
    if [ $pass -lt 2 ] && [ "$(cat "$p/comm" 2>/dev/null)" = postgres ]; then
      spared="$spared ${{p#/proc/}}"; continue
    fi
    kill -KILL "${{p#/proc/}}" 2>/dev/null && found="$found ${{p#/proc/}}"
  done
  [ -n "$found$spared" ] || break
  [ -z "$found" ] || echo "killed$found"
  for pid in $found $spared; do   # gone, or a zombie: it writes nothing more
    i=0
    while [ $i -lt 50 ] && [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ] && \
        [ -e "/proc/$pid/stat" ]; do sleep 0.1; i=$((i+1)); done
  done
  pass=$((pass+1))
done
users=$(sed -n 's/^user //p' "$led")
dirs=$(sed -n 's/^dir //p' "$led" | tac)
rm -rf "$run"
echo "removed $run"
for d in $dirs; do rmdir "$d" 2>/dev/null && echo "removed $d"; done
for u in $users; do
  [ -z "$(ls -A "$(dirname "$run")" 2>/dev/null)" ] || continue   # another run of ours is there
  # userdel refuses while a process of the account exists: a postmaster's zombie waits for its reaper
  i=0; until why=$(userdel "$u" 2>&1); do i=$((i+1)); [ $i -lt 100 ] || break; sleep 0.1; done
  if id -u "$u" >/dev/null 2>&1; then echo "kept user $u: $(echo "$why" | tr "\n" " ")"; else echo "removed user $u"; fi
done
exit 0
"""


def render(template: str, raw: tuple[str, ...] = (), **values: str) -> str:
    """The template with each value shell-quoted, but those named in `raw` (a here-document's body,
    a command prefix we built) as they are."""
    return template.format(**{k: v if k in raw else shlex.quote(str(v)) for k, v in values.items()})
