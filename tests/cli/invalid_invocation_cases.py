"""The invalid invocations test_invalid_invocations.py tries: (argv, text the error line must hold).

Every study's shared options and dimensions with values they cannot take, then each subcommand's
own. Data only: the tests and their fixtures are in test_invalid_invocations.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from pgpathbench.servers import guc
from pgpathbench.studies import STUDIES

REPO = Path(__file__).resolve().parents[2]
LONG_NAME = "/tmp/" + "d" * 300                               # one name past NAME_MAX
LONG_PATH = "/tmp/" + "/".join(["d" * 50] * 17)                # 872 bytes: past MAX_PATH
SECRET = "hunter2secret"
DSN = f"host=127.0.0.1 port=1 user=x password={SECRET} dbname=x connect_timeout=2"


def _common(prefix: list[str], checked_later: bool = True) -> list[tuple[list[str], str]]:
    """The options every server-using command shares, each with bad values (checked_later: also
    those refused after parsing, when the command gets that far)."""
    later = [([*prefix, "--pg-bindir", "/nonexistent/bin"], "--pg-bindir")] if checked_later else []
    return later + [
        ([*prefix, "--workspace", ""], "--workspace"),
        ([*prefix, "--workspace", "/proc/x"], "--workspace"),
        ([*prefix, "--workspace", "/sys/x"], "--workspace"),
        ([*prefix, "--workspace", LONG_NAME], "--workspace"),
        ([*prefix, "--workspace", LONG_PATH], "--workspace"),
        ([*prefix, "--workspace", "/etc/hostname/ws"], "--workspace: cannot write below /etc/hostname"),
        ([*prefix, "--results-dsn", ""], "--results-dsn"),
        ([*prefix, "--results-dsn", f"host=x password {SECRET}"], "--results-dsn"),
        ([*prefix, "--server-user", ""], "--server-user"),
        ([*prefix, "--server-user", f"source=host=x password={SECRET}"], "--server-user"),
        ([*prefix, "--pg-bindir", ""], "--pg-bindir"),
        # no abbreviation of --server-user; where --server is an option, a DSN without ROLE=
        ([*prefix, "--server", f"host=x password={SECRET}"], "--server"),
        ([*prefix, "--work", "/tmp"], "--work"),
        ([*prefix, "--bogus"], "--bogus"),
        ([*prefix, f"--bogus={SECRET}"], "--bogus"),
        ([*prefix, "--workspace"], "--workspace"),
    ]


# Every study: shared run options, each dimension with values it cannot take.
STUDY_CASES: list[tuple[list[str], str]] = []
for _name, _study in STUDIES.items():
    _run = ["run", _name, "--preset", "quick"]
    STUDY_CASES += _common(_run) + [
        ([*_run, "--repeat", "0"], "--repeat"),
        ([*_run, "--repeat", "1001"], "--repeat"),
        ([*_run, "--repeat", "²"], "--repeat"),
        ([*_run, "--repeat", "-1"], "--repeat"),
        ([*_run, "--repeat"], "--repeat"),
        ([*_run, "--seed", "-1"], "--seed"),
        ([*_run, "--seed", "9223372036854775808"], "--seed"),
        ([*_run, "--seed", "1e3"], "--seed"),
        ([*_run, "--preset", "huge"], "--preset"),
        ([*_run, "--keep-servers=yes"], "--keep-servers"),
    ]
    for _dim in _study.dimensions.values():
        _opt = "--" + _dim.name.replace("_", "-")
        STUDY_CASES += [([*_run, _opt, ""], _opt), ([*_run, _opt, "a,,b"], _opt), ([*_run, _opt, "ro\nrw"], _opt)]
        if _dim.values:
            STUDY_CASES.append(([*_run, _opt, "nosuch"], _opt))

FDW = ["run", "fdw-overhead", "--preset", "quick"]
SAMPLING = ["run", "remote-sampling", "--preset", "quick"]
INTERFACES = ["run", "interfaces", "--preset", "quick"]
FIDELITY = ["run", "interfaces-fidelity", "--preset", "quick"]
TPCH = ["run", "file-fdw-tpch", "--preset", "quick"]
HOST_A = ["--host", "a=ssh://u@h"]

PARAMETER_CASES = [
    ([*FDW, "--clients", "²"], "--clients: '²' is not a whole number"),
    ([*FDW, "--clients", "2147483648"], "--clients"),
    ([*FDW, "--clients", "0"], "--clients"),
    ([*FDW, "--clients", "-1"], "--clients"),
    ([*FDW, "--clients", "1.5"], "--clients"),
    ([*FDW, "--clients", "9" * 5000], "--clients"),
    ([*FDW, "--duration", "inf"], "--duration"),
    ([*FDW, "--duration", "1e400"], "--duration"),
    ([*FDW, "--duration", "nan"], "--duration"),
    ([*FDW, "--duration", "0"], "--duration"),
    ([*FDW, "--duration", "86401"], "--duration"),
    ([*FDW, "--duration", "1.5"], "--duration"),
    ([*FDW, "--scale", "99999999"], "--scale"),
    ([*FDW, "--scale", "0"], "--scale"),
    ([*FDW, "--scale", "²"], "--scale"),
    ([*FDW, "--max-tries", "0"], "--max-tries"),
    ([*FDW, "--max-tries", "1000000"], "--max-tries"),
    ([*FDW, "--isolation", "dirty"], "--isolation"),
    ([*FDW, "--latency", "10s", "--target", "local,fdw_local"], "--latency"),
    ([*FDW, "--latency", "5ms", "--target", "local"], "--latency"),
    ([*FDW, "--bandwidth", "1gbit", "--target", "local,fdw_local"], "--bandwidth"),
    ([*FDW, "--latency", "99999s", "--target", "fdw_external"], "--latency"),
    ([*FDW, "--latency", "1e400ms", "--target", "fdw_external"], "--latency"),
    ([*FDW, "--latency", "0.5ms"], "--latency"),
    ([*FDW, "--latency", "-1ms"], "--latency"),
    ([*FDW, "--bandwidth", "9999999gbit", "--target", "fdw_external"], "--bandwidth"),
    ([*FDW, "--bandwidth", "0kbit", "--target", "fdw_external"], "--bandwidth"),
    ([*FDW, "--bandwidth", "1gbps", "--target", "fdw_external"], "--bandwidth"),
    ([*FDW, "--bandwidth", "", "--target", "fdw_external"], "--bandwidth"),
    ([*FDW, "--workload", "rw", "--target", "fdw_external_ro"], "--target"),
    ([*FDW, "--pg", "14"], "--pg"),
    ([*FDW, "--pool-mode", "statement", "--via", "pgbouncer"], "--pool-mode: unknown value 'statement'"),
    ([*FDW, "--pool-mode", "transaction"], "--pool-mode: sets the pool mode of a PgBouncer"),
    ([*FDW, "--pool-mode", "session", "--via", "direct", "--fdw-via", "direct"], "--pool-mode"),
    ([*FDW, "--fdw-via", "pgbouncer", "--target", "local"], "--fdw-via pgbouncer: no --target has an FDW hop"),
    ([*FDW, "--fdw-via", "pgbouncer", "--target", "fdw_external", "--latency", "5ms"], "--fdw-via"),
    ([*FDW, "--fdw-via", "pgbouncer", "--target", "fdw_local", "--server", f"source={DSN}"],
     "--fdw-via pgbouncer: a pooler on the FDW hop with your server (--server source=...)"),
    ([*FDW, "--via", "pgbouncer", "--server", "source=host=db1 dbname=x sslmode=verify-full"],
     "--via pgbouncer: your server's DSN (--server source) has sslmode=verify-full without sslrootcert"),
    ([*FDW, "--connect", "always"], "--connect"),
    ([*SAMPLING, "--via", "pgbouncer"], "--via"),
    ([*TPCH, "--via", "pgbouncer"], "--via"),
    ([*TPCH, "--pool-mode", "transaction"], "--pool-mode"),
    ([*FDW, "--via", "pgbouncer", "--set", "work_mem=1MB,4MB"], "--set work_mem: not with --via pgbouncer"),
    ([*INTERFACES, "--pool-mode", "session"], "--pool-mode: sets the pool mode of a PgBouncer"),
    ([*INTERFACES, "--via", "pgbouncer", "--set", "work_mem=1MB"], "--set work_mem: not with --via pgbouncer"),
    # a pooler in front of a user's server verifies it as the DSN says, and --tls stays the DSN's
    ([*INTERFACES, "--via", "pgbouncer", "--server", "local=host=db1 dbname=x sslmode=verify-full"],
     "--via pgbouncer: your server's DSN (--server local) has sslmode=verify-full without sslrootcert"),
    ([*INTERFACES, "--via", "pgbouncer", "--server", "remote=host=db1 sslmode=verify-ca", "--transport", "remote"],
     "--via pgbouncer: your server's DSN (--server remote) has sslmode=verify-ca without sslrootcert"),
    ([*INTERFACES, "--via", "pgbouncer", "--server", "local=host=db1 dbname=x", "--transport", "tcp", "--tls", "on"],
     "--tls: your server (--server local) uses the TLS its DSN asks for"),
    ([*FDW, "--workload", "r\udcffo"], "--workload"),                     # not UTF-8
    ([*FDW, "--rate"], "--rate"),
    ([*FDW, "--rate", "0"], "--rate: '0' is not a positive rate"),
    ([*FDW, "--rate", "-100"], "--rate: '-100' is not a positive rate"),
    ([*FDW, "--rate", "0x"], "--rate"),
    ([*FDW, "--rate", "1e3"], "--rate"),
    ([*FDW, "--rate", "auto,800"], "--rate: auto chooses the steps itself"),
    ([*FDW, "--latency-limit", "50"], "--latency-limit: skips transactions late"),
    ([*FDW, "--rate", "100", "--latency-limit", "0"], "--latency-limit"),
    ([*FDW, "--rate", "100", "--latency-limit", "inf"], "--latency-limit"),
    ([*SAMPLING, "--rows", "0"], "--rows"),
    ([*SAMPLING, "--rows", "99999999999M"], "--rows"),
    ([*SAMPLING, "--rows", "1.5k"], "--rows"),
    ([*SAMPLING, "--rows", "9" * 5000], "--rows"),
    ([*SAMPLING, "--fraction", "0"], "--fraction"),
    ([*SAMPLING, "--fraction", "nan"], "--fraction"),
    ([*SAMPLING, "--fraction", "inf"], "--fraction"),
    ([*SAMPLING, "--fraction", "2"], "--fraction"),
    ([*SAMPLING, "--stats-target", "0"], "--stats-target"),
    ([*SAMPLING, "--stats-target", "²"], "--stats-target"),
    ([*SAMPLING, "--stats-target", "10001"], "--stats-target"),
    ([*SAMPLING, "--pg", "15"], "--pg"),
    ([*SAMPLING, "--latency", "5ms", "--access", "direct", "--test", "sampling"], "--latency"),
    ([*SAMPLING, "--bandwidth", "1gbit", "--access", "direct", "--test", "sampling"], "--bandwidth"),
    ([*SAMPLING, "--bandwidth", "1tbit"], "--bandwidth"),
    ([*INTERFACES, "--iterations", "0"], "--iterations"),
    ([*INTERFACES, "--iterations", "2000000000"], "--iterations"),
    ([*INTERFACES, "--t50k-rows", "1000"], "--t50k-rows"),
    ([*INTERFACES, "--t10m-rows", "0"], "--t10m-rows"),
    ([*INTERFACES, "--t10m-rows", "99999m"], "--t10m-rows"),
    ([*INTERFACES, "--fetch", "0"], "--fetch"),
    ([*INTERFACES, "--fetch", "²"], "--fetch"),
    ([*INTERFACES, "--fetch", "99999999999999"], "--fetch"),
    ([*INTERFACES, "--timeout", "0"], "--timeout"),
    ([*INTERFACES, "--timeout", "604801"], "--timeout"),
    ([*INTERFACES, "--jvm-options=-jar x.jar"], "--jvm-options"),
    ([*INTERFACES, "--jvm-options='unclosed"], "--jvm-options"),
    ([*INTERFACES, "--latency", "5ms", "--transport", "unix"], "--latency"),
    ([*INTERFACES, "--bandwidth", "1gbit", "--transport", "tcp"], "--bandwidth"),
    ([*INTERFACES, "--interface", "jdbc", "--transport", "unix"], "--transport"),
    ([*FIDELITY, "--tool", "libpq"], "--tool"),
    ([*FIDELITY, "--rows", "none"], "--rows"),
    ([*FIDELITY, "--rows", "0"], "--rows"),
    ([*FIDELITY, "--iterations", "0"], "--iterations"),
    ([*FIDELITY, "--timeout", "inf"], "--timeout"),
    ([*FIDELITY, "--latency", "1ms"], "--latency"),
    ([*TPCH, "--queries", "23"], "--queries"),
    ([*TPCH, "--queries", "q0"], "--queries"),
    ([*TPCH, "--queries", "²"], "--queries"),
    ([*TPCH, "--scale", "0"], "--scale"),
    ([*TPCH, "--scale", "301"], "--scale"),
    ([*TPCH, "--scale", "nan"], "--scale"),
    ([*TPCH, "--scale", "inf"], "--scale"),
    ([*TPCH, "--partitions", "0"], "--partitions"),
    ([*TPCH, "--partitions", "17"], "--partitions"),
    ([*TPCH, "--partitions", "²"], "--partitions"),
    ([*TPCH, "--timeout", "-5"], "--timeout"),
    ([*TPCH, "--timeout", "604801"], "--timeout"),
    # files: only regular UTF-8 text within the option's bound, whose SQL the server parses (test_hostile_files.py
    # tries every kind of file on every option that reads one)
    ([*FDW, "--script", "/dev/zero"], "--script: /dev/zero is a character device"),
    ([*FDW, "--script", "/dev/urandom"], "--script: /dev/urandom is a character device"),
    ([*FDW, "--script", "/tmp"], "--script: /tmp is a directory"),
    ([*FDW, "--script", "/proc/self/environ"], "--script: /proc/self/environ is not text"),
    ([*FDW, "--script", "/etc/passwd"], "--script /etc/passwd: line 1: the server cannot parse it"),
    ([*FDW, "--init", "/dev/zero"], "--init: /dev/zero is a character device"),
    ([*FDW, "--init", "/proc/self/environ"], "--init: /proc/self/environ is not text"),
    ([*INTERFACES, "--query-file", "q=/dev/zero"], "--query-file: q: /dev/zero is a character device"),
    ([*INTERFACES, "--query-file", "q=/etc/passwd"], "--query-file: q: the SQL must be one query"),
    ([*TPCH, "--query-file", "mine=/dev/urandom"], "--query-file: mine: /dev/urandom is a character device"),
    # --fdw-host: a host name or address, a port from 1 to 65535, never a DSN repeated
    ([*FDW, "--server", "source=host=db1 dbname=x", "--fdw-host", "source=10.0.0.5:99999"], "--fdw-host source: the port"),
    ([*FDW, "--server", "source=host=db1 dbname=x", "--fdw-host", "source=a b;c"], "--fdw-host source: the host"),
    ([*FDW, "--fdw-host", "source=10.0.0.5:0"], "--fdw-host source: the port '0'"),
    ([*FDW, "--fdw-host", "source=[fd00::5:5432"], "--fdw-host source"),
    ([*FDW, "--fdw-host", "source=db-.example.com"], "--fdw-host source: the host"),
    ([*FDW, "--fdw-host", f"source=host=x password={SECRET}"], "--fdw-host source: the host"),
    ([*FDW, "--server", "source=host=db1 dbname=x", "--fdw-host", "source=10.0.0.5", "--fdw-host", "source=db2"],
     "--fdw-host source: given twice"),
    ([*INTERFACES, "--transport", "unix", "--tls", "on"], "--tls on: the unix transport has no TLS"),
    ([*INTERFACES, "--transport", "unix", "--tls", "off,on"], "--tls on: the unix transport has no TLS"),
    ([*INTERFACES, "--server", "local=host=db1 dbname=x", "--transport", "tcp", "--tls", "on"],
     "--tls: your server (--server local) uses the TLS its DSN asks for"),
    ([*INTERFACES, "--server", "remote=host=db1 dbname=x", "--tls", "off"], "--tls: your server (--server remote)"),
    ([*FDW, "--server", "source=host=db1 dbname=x", "--tls", "on"], "--tls: your server (--server source)"),
    ([*SAMPLING, "--server", "external=host=db1 dbname=x", "--tls", "off,on"], "--tls: your server (--server external)"),
]

RUN_CASES = [
    (["run"], "name a study"),
    (["run", "nosuch"], "STUDY"),
    (["run", "--resume", ""], "--resume"),
    (["run", "--resume", "latest~99999999999999999999"], "--resume"),
    (["run", "--resume", "latest~-1"], "--resume"),
    (["run", "--resume", "latest~x"], "--resume"),
    (["run", "--resume", "a b"], "--resume"),
    (["run", "--resume", "x" * 65], "--resume"),
    (["run", "--resume", "x", "fdw-overhead"], "--resume"),
    (["run", "--resume"], "--resume"),
    (["run", "fdw-overhead", "--resume", "latest"], "--resume"),
] + _common(["run"], checked_later=False)

READ_CASES = [
    (["runs", "--format", "xml"], "--format"),
    (["runs", "extra"], "extra"),
    *_common(["runs"]),
    (["report", "latest~99999999999999999999999"], "RUN"),
    (["report", "latest~1000001"], "RUN"),
    (["report", "latest~x"], "RUN"),
    (["report", "a b"], "RUN"),
    (["report", f"host=x password={SECRET}"], "RUN"),
    (["report", "--html", ""], "--html"),
    (["report", "--html", "/proc/x.html"], "--html"),
    (["report", "--html", "/sys/x.html"], "--html"),
    (["report", "--html", "/tmp"], "--html"),
    (["report", "--html", "/nonexistent/dir/r.html"], "--html"),
    (["report", "--html", LONG_NAME + ".html"], "--html"),
    (["report", "--format", "xml"], "--format"),
    (["report", "--format"], "--format"),
    (["report", "--wide", "--format", "csv"], "--wide: widens the terminal table only"),
    (["report", "--wide", "--format", "json"], "--wide"),
    (["report", "--wide", "--format", "markdown"], "--wide"),
    (["report", "--wide", "--html", "/tmp/pgpathbench-never.html"], "--wide: not with --html"),
    (["report", "--format", "csv", "--html", "/tmp/pgpathbench-never.html"], "--format: not with --html"),
    (["report", "--overwrite"], "--overwrite: replaces the file of --html"),
    (["report", "--html", "/etc/hostname"], "--html"),      # exists (root), or not writable: never replaced
    *_common(["report"]),
    (["export", "--format", "xml"], "--format"),
    (["export", "latest~99999999999999999999"], "RUN"),
    (["export", "latest", "extra"], "extra"),
    (["export", "a b"], "RUN"),
    *_common(["export"]),
    (["compare", "onlyone"], "RUN_B"),
    (["compare"], "RUN_A"),
    (["compare", "latest~99999999999999999999", "latest"], "RUN_A"),
    (["compare", "latest", "latest~99999999999999999999"], "RUN_B"),
    (["compare", "a", "b", "--format", "csv"], "--format"),
    (["compare", "a", "b", "--html", ""], "--html"),
    (["compare", "a", "b", "--html", "/proc/x.html"], "--html"),
    (["compare", "a", "b", "--force=yes"], "--force"),
    (["compare", "a", "b", "--format", "markdown", "--html", "/tmp/pgpathbench-never.html"], "--format"),
    (["compare", "a", "b", "--overwrite"], "--overwrite"),
    (["compare", "a", "b", "c"], "c"),
    (["compare", "a", "b", "--allow-unpaired"], "--allow-unpaired"),      # relaxes a gate not asked for
    (["compare", "a", "b", "--fail-if-slower", "5", "--allow-unpaired=yes"], "--allow-unpaired"),
    *_common(["compare", "a", "b"]),
]

OTHER_CASES = [
    ([], "COMMAND"),
    (["--bogus"], "--bogus"),
    (["--bogus", "run", "fdw-overhead"], "--bogus"),
    (["nosuch"], "COMMAND"),
    ([f"host=x password={SECRET}"], "COMMAND"),
    (["studies", "--format", "xml"], "--format"),
    (["studies", "--workspace", "/tmp"], "--workspace"),
    (["studies", "extra"], "extra"),
    (["studies", "--bogus"], "--bogus"),
    (["--version", "extra"], "--version: takes nothing else"),
    (["--version", "--version"], "--version"),
    (["--version", "run"], "--version"),
    (["doctor", "extra"], "extra"),
    (["doctor", "--server", "bogusrole=host=x"], "--server bogusrole: not a role of any study; choose from"),
    (["doctor", "--force"], "--force"),
    *_common(["doctor"], checked_later=False),   # doctor reports a missing --pg-bindir as a finding
    # --host (issue 47): malformed before anything connects; a host that refuses: tests/integration/test_hosts.py
    (["doctor", "--host", "ssh://u@h"], "--host: give NAME=ssh://[USER@]ADDRESS[:PORT]"),
    (["doctor", "--host", "A=ssh://u@h"], "--host: give NAME="),
    (["doctor", "--host", "a="], "--host: a: neither ssh://"),
    (["doctor", "--host", "a=-oProxyCommand=x"], "--host: a: neither ssh://"),
    (["doctor", "--host", "a=http://u@h"], "--host: a: the scheme is ssh://"),
    (["doctor", "--host", "a=ssh://@h"], "--host: a: the user is"),
    (["doctor", "--host", f"a=ssh://u:{SECRET}@h"], "--host: a: give the login user"),
    (["doctor", "--host", "a=ssh://-u@h"], "--host: a: the user is"),
    (["doctor", "--host", "a=ssh://u@-h"], "--host: a: the address is"),
    (["doctor", "--host", "a=ssh://u@h:0"], "--host: a: the port is 1 to 65535"),
    (["doctor", "--host", "a=ssh://u@h:65536"], "--host: a: the port is 1 to 65535"),
    (["doctor", "--host", "a=ssh://u@h:x"], "--host: a: the address is"),
    (["doctor", "--host", "a=ssh://u@h", "--host", "a=ssh://v@h"], "--host: a is named twice"),
    (["doctor", "--host", "a=ssh://u@h", "--accept-host-key", "b"], "--accept-host-key: no --host is named b"),
    (["doctor", "--host", "a=ssh://u@h", "--ssh-identity", "/nonexistent/key"], "--ssh-identity: /nonexistent"),
    (["doctor", "--ssh-identity"], "--ssh-identity"),
    (["doctor", "--host", "a=ssh://u@h", "--ssh-config", "/nonexistent/config"], "--ssh-config: /nonexistent/config "
                                                                                 "is not a readable file"),
    (["doctor", "--host", "a=h", "--ssh-config", "/tmp"], "--ssh-config: /tmp is not a readable file"),
    (["doctor", "--ssh-config"], "--ssh-config"),
    # --place (issue 47): checked before any host is reached; a host that refuses: tests/integration/test_place.py
    ([*FDW, "--place", "source=a"], "--place: no --host is named a; add --host a=ssh://"),
    ([*FDW, "--place", "source", *HOST_A], "--place: give ROLE=NAME"),
    ([*FDW, "--place", "source=a", "--place", "source=a", *HOST_A], "--place: source is placed twice"),
    ([*FDW, "--place", "nosuch=a", *HOST_A], "--place: no role nosuch in fdw-overhead; its roles: source"),
    ([*FDW, "--place", "remote=a", *HOST_A], "--place: remote is a role of interfaces, not of fdw-overhead"),
    ([*INTERFACES, "--place", "local=a", *HOST_A], "--place: local is not a managed server of interfaces that can"),
    ([*TPCH, "--place", "worker=a", *HOST_A], "--place worker=a: places the postgres_fdw layout's workers, and the "
     "run measures no postgres_fdw layout; add postgres_fdw to --layout"),
    ([*TPCH, "--place", "citus_worker=a", *HOST_A], "--place citus_worker=a: places the citus layout's workers, and "
     "the run measures no citus layout; add citus to --layout"),
    ([*TPCH, "--layout", "citus", "--workers", "2", "--place", "citus_worker3=a", *HOST_A],
     "--place citus_worker3=a: the citus layout has citus_worker1..2 (--workers 2)"),
    ([*TPCH, "--layout", "citus", "--place", "citus_worker=a", "--place", "citus_worker1=a", *HOST_A],
     "--place: citus_worker places every citus_worker1..N and citus_worker1 one of them"),
    ([*TPCH, "--place", "citus_worker=a", *HOST_A, "--server", f"coordinator={DSN}"],
     "--place citus_worker=a: the citus layout runs on your Citus cluster (--server coordinator)"),
    ([*TPCH, "--place", "worker17=a", *HOST_A], "--place: worker17: a run has at most 16 of worker1..N"),
    ([*TPCH, "--place", "workers=a", *HOST_A], "--place: no role workers in file-fdw-tpch"),
    ([*TPCH, "--place", "worker0=a", *HOST_A], "--place: no role worker0 in file-fdw-tpch"),
    ([*TPCH, "--place", "worker=a", "--place", "worker2=a", *HOST_A],
     "--place: worker places every worker1..N and worker2 one of them; give --place worker=NAME alone"),
    ([*TPCH, "--place", "worker1=a", "--place", "worker=a", *HOST_A], "--place: worker places every worker1..N"),
    ([*TPCH, "--place", "worker2=a", "--place", "worker2=a", *HOST_A], "--place: worker2 is placed twice"),
    ([*TPCH, "--layout", "postgres_fdw", "--partitions", "2", "--place", "worker3=a", *HOST_A],
     "--place worker3=a: the postgres_fdw layout has worker1..2 (--partitions 2)"),
    ([*TPCH, "--layout", "postgres_fdw", "--storage", "regular,columnar", "--place", "worker=a", *HOST_A],
     "--storage columnar: a placed worker (worker=a) would need Citus's citus_columnar"),
    ([*TPCH, "--layout", "postgres_fdw", "--place", "worker1=a", *HOST_A, "--host", "b=ssh://u@h2"],
     "--host b: a run uses hosts only for --place"),
    ([*SAMPLING, "--place", "external=a", *HOST_A], "--place: a placed external reaches the source over the"),
    ([*SAMPLING, "--place", "source=a", *HOST_A, "--bandwidth", "1gbit"], "--bandwidth: a placed server's path"),
    ([*INTERFACES, "--place", "remote=a", *HOST_A, "--latency", "0ms,2ms", "--bandwidth", "1gbit"],
     "--bandwidth: a placed server's path"),   # --latency alone applies (the delay on top of the real link)
    ([*SAMPLING, "--place", "source=a", *HOST_A, "--tls", "on"], "--tls: on cannot apply to a placed server"),
    ([*FDW, "--place", "source=a", *HOST_A, "--server", f"source={DSN}"], "--place: source is also given by --server"),
    ([*FDW, "--place", "external=a", *HOST_A], "--place: a placed external reaches the source over the network"),
    ([*FDW, "--place", "source=a", *HOST_A, "--host", "b=ssh://u@h2"], "--host b: a run uses hosts only for --place"),
    ([*FDW, "--place", "source=a", *HOST_A, "--target", "fdw_external", "--bandwidth", "1mbit"],
     "--bandwidth: a placed server's path is the real link"),
    ([*FDW, "--place", "source=a", *HOST_A, "--target", "fdw_external", "--fdw-via", "pgbouncer"],
     "--fdw-via: pgbouncer cannot apply to a placed server"),
    ([*FDW, "--host", "a=ssh://u@h"], "--host a: a run uses hosts only for --place"),
    ([*FDW, "--host", "a=ssh://u@h:99999", "--place", "external=a"], "--host: a: the port is 1 to 65535"),
    ([*FDW, "--accept-host-key", "a"], "--accept-host-key: a run uses hosts only for --place"),
    ([*FDW, "--ssh-config", str(REPO / "README.md")], "--ssh-config: a run uses hosts only for --place"),
    ([*FDW, "--place", "source=a", *HOST_A, "--ssh-config", "/nonexistent/config"],
     "--ssh-config: /nonexistent/config is not a readable file"),
    (["clean", "--all=yes"], "--all"),
    (["clean", "extra"], "extra"),
    (["clean", "--al"], "--al"),
    *_common(["clean"]),
]

# --set of what holds a managed server's isolation, layout and identity (servers/guc.HELD), and TLS (issue 42).
SET_CASES = [([*FDW, "--set", f"{name}={value}"], f"--set {name}: not a knob: ") for name, value in [
    *[(name, "x") for name in guc.HELD],
    ("listen_addresses", "0.0.0.0"), ("unix_socket_directories", "/tmp"), ("port", "5432"),
    ("unix_socket_permissions", "0777"), ("data_directory", "/tmp"), ("ssl", "on"), ("ssl_cert_file", "/tmp/c"),
    ("ssl_min_protocol_version", "TLSv1.3"), ("ssl_passphrase_command", "x")]]

CASES = STUDY_CASES + PARAMETER_CASES + RUN_CASES + READ_CASES + OTHER_CASES + SET_CASES
if os.geteuid() == 0:   # servers then run as another user, who must exist
    CASES += [(["runs", "--server-user", "no_such_user_x"], "--server-user"),
              ([*FDW, "--server-user", "no_such_user_x"], "--server-user")]
