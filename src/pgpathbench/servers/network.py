"""Emulated remote links between a client and a managed server.

This kernel has no netem, so latency is added in user space by Toxiproxy, a TCP proxy: the
client connects to the proxy on 127.0.0.1, the proxy to the server's TCP port.

Latency semantics: a link's `latency_ms` is the round-trip time it ADDS. `--latency 5ms` means
every request/response exchange takes 5 ms longer, i.e. "a 5 ms link adds 5 ms RTT". Toxiproxy
delays each direction ("stream") separately and only in whole milliseconds, so splitting 5 ms as
2.5 + 2.5 is impossible; we therefore put the whole delay on the downstream stream (server ->
client) and none upstream. For PostgreSQL's request/response protocol that is indistinguishable
from a symmetric link: each query waits for its answer, and the answer comes `latency_ms` late.
(What differs: one-way delivery of client data, e.g. COPY FROM or pipelined queries, reaches the
server without delay; only the acknowledging replies are late.) Jitter is Toxiproxy's: each chunk
gets `latency +/- jitter` (uniform, whole ms), chunks stay in order.

Bandwidth (`bandwidth_kbit`, from '1gbit' etc., SI units as in tc) limits each direction on its
own, as a full-duplex link does. Toxiproxy takes KB/s (1000 bytes), so the rate is rounded to
whole KB/s, i.e. multiples of 8 kbit/s; the Link records the effective rate.

The proxy hop itself costs round-trip time, and a delayed chunk wakes up late: measured here
(2 vCPUs) a 0 ms link adds ~0.01-0.1 ms, an L ms link adds L + 0.3-0.6 ms whatever L is (1, 5,
20). So measure_rtt() gives the real figure of a path: record it and report results against it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from .. import validate
from ..procs import OsUser
from .cluster import free_port

TOXIPROXY = "toxiproxy-server"
REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 10
API_TIMEOUT_S = 5


# -- parsing ----------------------------------------------------------------------------------
_LATENCY_UNITS = {"ms": Decimal(1), "s": Decimal(1000)}
_BANDWIDTH_UNITS = {"kbit": Decimal(1), "mbit": Decimal(1000), "gbit": Decimal(1_000_000)}


def _split(text: str, what: str) -> tuple[Decimal, str]:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*", text.lower())
    if not m:
        raise ValueError(f"{what} '{text}': expected a number with a unit")
    return Decimal(m.group(1)), m.group(2)


def parse_latency(text: str) -> int:
    """'5ms' -> 5, '1s' -> 1000, '0' -> 0. Whole milliseconds only: Toxiproxy takes no less."""
    value, unit = _split(text, "latency")
    if unit == "" and value == 0:
        return 0
    if unit not in _LATENCY_UNITS:
        raise ValueError(f"latency '{text}': unit must be ms or s (e.g. 5ms)")
    ms = value * _LATENCY_UNITS[unit]
    if ms != ms.to_integral_value():
        raise ValueError(f"latency '{text}': whole milliseconds only (Toxiproxy's resolution)")
    if ms > validate.MAX_LATENCY_MS:
        raise ValueError(f"latency '{text}' is too large: at most {validate.MAX_LATENCY_MS // 1000}s "
                         f"({validate.MAX_LATENCY_MS}ms) per round trip")
    return int(ms)


def parse_bandwidth(text: str) -> int:
    """'1gbit' -> 1000000, '100mbit' -> 100000, '512kbit' -> 512 (kbit/s, SI as in tc)."""
    value, unit = _split(text, "bandwidth")
    if unit not in _BANDWIDTH_UNITS:
        # Not 'kbps' etc.: tc reads those as bytes, a factor 8 easily misread.
        raise ValueError(f"bandwidth '{text}': unit must be kbit, mbit or gbit (e.g. 1gbit)")
    kbit = value * _BANDWIDTH_UNITS[unit]
    if kbit != kbit.to_integral_value() or kbit < 8:
        raise ValueError(f"bandwidth '{text}': must be whole kbit/s, at least 8kbit")
    if kbit > validate.MAX_BANDWIDTH_KBIT:
        raise ValueError(f"bandwidth '{text}' is too large: at most {validate.MAX_BANDWIDTH_KBIT // 1_000_000}gbit")
    return int(kbit)


# -- links ------------------------------------------------------------------------------------
@dataclass
class Link:
    """One emulated link; a client connects to host:port instead of the server."""

    name: str
    kind: str                       # 'proxy' (Toxiproxy) or 'netns' (namespace + veth)
    host: str
    port: int
    latency_ms: int = 0             # added round-trip time, see the module docstring
    jitter_ms: int = 0
    bandwidth_kbit: int | None = None   # per direction, effective (after rounding to KB/s)
    upstream: str = ""              # host:port the link leads to
    toxics: list[dict] = field(default_factory=list)  # exactly what was configured

    def conninfo(self, base: str) -> str:
        """The server's TCP conninfo, redirected through this link."""
        return make_conninfo(base, host=self.host, port=str(self.port))

    def describe(self) -> dict:
        return asdict(self)


def find_toxiproxy(binary: str | Path | None = None) -> Path | None:
    """An explicit path, else the bootstrap's .tools/bin, else PATH."""
    if binary:
        return Path(binary) if Path(binary).is_file() else None
    local = REPO / ".tools" / "bin" / TOXIPROXY
    if local.is_file():
        return local
    found = shutil.which(TOXIPROXY)
    return Path(found) if found else None


class ToxiproxyError(RuntimeError):
    pass


class ToxiproxyServer:
    """A private toxiproxy-server on 127.0.0.1, our child (PDEATHSIG); a context manager.

    When we are root it runs as the unprivileged server user: a proxy needs no privilege.
    """

    def __init__(self, binary: str | Path | None = None, user: OsUser | None = None,
                 log_path: Path | None = None, config_path: Path | None = None):
        self.binary = find_toxiproxy(binary)
        if self.binary is None:
            raise FileNotFoundError(f"{binary or TOXIPROXY} not found: run scripts/install-toxiproxy")
        self.user = user or OsUser.for_servers()
        self.log_path = log_path
        # An (empty) startup config in the workspace: it also names the workspace on the
        # command line, so leak checks and `clean` can tell this proxy from anyone else's.
        self.config_path = config_path
        self.port: int | None = None
        self.links: dict[str, Link] = {}
        self._proc: subprocess.Popen | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ToxiproxyServer":
        for _ in range(5):  # the API port is picked before it is bound: retry a lost race
            self.port = free_port()
            log = open(self.log_path, "a+b") if self.log_path else tempfile.TemporaryFile()
            with log:
                env = {**self.user.env(), "LOG_LEVEL": "warn"}  # not one line per connection
                args = [str(self.binary), "-host", "127.0.0.1", "-port", str(self.port)]
                if self.config_path is not None:
                    self.config_path.write_text("[]\n")
                    args += ["-config", str(self.config_path)]
                self._proc = self.user.spawn(args,
                                             stop_signal=signal.SIGTERM, env=env,
                                             stdout=log, stderr=subprocess.STDOUT)
                if self._wait_ready():
                    return self
                self.close()
                log.seek(0)
                out = log.read().decode(errors="replace")
            if "address already in use" not in out:
                raise ToxiproxyError(f"{self.binary} did not start:\n{out[-2000:]}")
        raise ToxiproxyError(f"{self.binary}: no free API port after 5 tries")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self._proc.poll() is None:
            try:
                self._request("GET", "/version")
                return True
            except (OSError, ToxiproxyError):
                time.sleep(0.02)
        return False

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self.links.clear()
        if proc is None or proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            proc.send_signal(sig)
            try:
                proc.wait(5)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> "ToxiproxyServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _request(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=API_TIMEOUT_S) as resp:
                text = resp.read()
        except urllib.error.HTTPError as e:
            raise ToxiproxyError(f"toxiproxy {method} {path}: {e.code} {e.read().decode(errors='replace')}") from None
        return json.loads(text) if text.strip().startswith((b"{", b"[")) else text.decode()

    def add_link(self, name: str, upstream_host: str, upstream_port: int, latency_ms: int = 0,
                 jitter_ms: int = 0, bandwidth_kbit: int | None = None) -> Link:
        """A proxy on 127.0.0.1 (a port the kernel picks) to upstream, with its toxics."""
        if latency_ms < 0 or not 0 <= jitter_ms <= latency_ms:
            raise ValueError(f"link {name}: need latency >= jitter >= 0 (got {latency_ms}, {jitter_ms})")
        upstream = f"{upstream_host}:{upstream_port}"
        created = self._request("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0",
                                                     "upstream": upstream, "enabled": True})
        host, port = created["listen"].rsplit(":", 1)
        link = Link(name, "proxy", host, int(port), latency_ms, jitter_ms, upstream=upstream)
        toxics = []
        if latency_ms:
            toxics.append({"name": "latency_downstream", "type": "latency", "stream": "downstream",
                           "toxicity": 1.0, "attributes": {"latency": latency_ms, "jitter": jitter_ms}})
        if bandwidth_kbit:
            rate = max(1, round(bandwidth_kbit / 8))  # kbit/s -> KB/s (1000 bytes, as Toxiproxy counts)
            link.bandwidth_kbit = rate * 8
            toxics += [{"name": f"bandwidth_{s}", "type": "bandwidth", "stream": s, "toxicity": 1.0,
                        "attributes": {"rate": rate}} for s in ("downstream", "upstream")]
        try:
            for toxic in toxics:
                self._request("POST", f"/proxies/{name}/toxics", toxic)
        except BaseException:
            self.remove_link(name)
            raise
        link.toxics = toxics
        self.links[name] = link
        return link

    def remove_link(self, name: str) -> None:
        self.links.pop(name, None)
        try:
            self._request("DELETE", f"/proxies/{name}")
        except ToxiproxyError:
            pass  # already gone

    def proxies(self) -> dict:
        """Toxiproxy's own view of its proxies and toxics, for checks and records."""
        return self._request("GET", "/proxies")

    def verify(self) -> list[str]:
        """Each of our proxies as we set it up (listen, upstream, enabled, exactly our toxics), or
        what differs. The API has no authentication: any local user can change a proxy."""
        found, problems = self.proxies(), []
        for name, link in self.links.items():
            proxy = found.get(name)
            if proxy is None:
                problems.append(f"proxy {name} was removed")
                continue
            if not proxy.get("enabled") or proxy.get("upstream") != link.upstream \
                    or proxy.get("listen") != f"{link.host}:{link.port}":
                problems.append(f"proxy {name} was changed (enabled {proxy.get('enabled')}, "
                                f"upstream {proxy.get('upstream')}, listen {proxy.get('listen')})")
            if _toxic_set(proxy.get("toxics") or []) != _toxic_set(link.toxics):
                problems.append(f"toxics of {name} were changed: expected {_toxic_text(link.toxics)}, "
                                f"found {_toxic_text(proxy.get('toxics') or [])}")
        return problems


def _toxic_set(toxics: list[dict]) -> set:
    return {(t.get("name"), t.get("type"), t.get("stream"), float(t.get("toxicity", 1)),
             json.dumps(t.get("attributes") or {}, sort_keys=True)) for t in toxics}


def _toxic_text(toxics: list[dict]) -> str:
    return ", ".join(f"{t.get('type')} {t.get('stream')} {t.get('attributes')}" for t in toxics) or "none"


# -- measuring ----------------------------------------------------------------------------------
def measure_rtt(conninfo: str, n: int = 200, passfile: Path | None = None, password: str | None = None) -> dict:
    """Round-trip time of one connection: n timed `SELECT 1` (one network round trip each); passfile:
    libpq's password file holding the server's password (Cluster.passfile)."""
    extra = {"passfile": str(passfile)} if passfile is not None else {}
    if password is not None:   # in-process only, as a keyword: never in a conninfo shown anywhere
        extra["password"] = password
    with psycopg.connect(conninfo, autocommit=True, **extra) as conn:
        return time_statement(conn, "SELECT 1", n)


def time_statement(conn: psycopg.Connection, statement: str, n: int, warmup: int = 10) -> dict:
    """n timed runs of a one-row statement on `conn` after `warmup` untimed ones (the connection's
    and the plan cache's first costs): median, p95 and min in ms."""
    times = []
    with conn.cursor() as cur:
        for i in range(n + warmup):
            t0 = time.perf_counter()
            cur.execute(statement)
            cur.fetchone()
            if i >= warmup:
                times.append((time.perf_counter() - t0) * 1000)
    return rtt_summary(times)


def rtt_summary(times_ms: list[float]) -> dict:
    """Round trips in ms -> median, p95, min and their number (as probes are stored)."""
    times, n = sorted(times_ms), len(times_ms)
    return {"median_ms": statistics.median(times), "p95_ms": times[min(n - 1, round(0.95 * (n - 1)))],
            "min_ms": times[0], "n": n}


# -- availability -------------------------------------------------------------------------------
def available_link_kinds(binary: str | Path | None = None) -> dict[str, str]:
    """For `doctor`: each link kind -> 'ok: ...' or the reason it is unavailable."""
    kinds = {}
    found = find_toxiproxy(binary)
    kinds["proxy"] = f"ok: {found}" if found else f"{TOXIPROXY} not found: run scripts/install-toxiproxy"
    if os.geteuid() != 0:
        kinds["netns"] = "needs root (ip netns add, veth pairs)"
    elif not shutil.which("ip"):
        kinds["netns"] = "no 'ip' command: apt-get install iproute2"
    else:
        res = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        kinds["netns"] = "ok: ip netns (bandwidth via tc tbf; no netem here, so no latency)" \
            if res.returncode == 0 else f"ip netns does not work: {res.stderr.strip()}"
    return kinds
