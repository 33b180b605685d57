"""Range checks shared by every option, run before anything is written.

Each parser takes the text a user typed and returns the value, or raises ValueError with a
message that says what is wrong and what would do (the caller prefixes the option's name).
Numbers are ASCII digits only ('²' is a digit to str.isdigit, not to int), bounded above as
well as below: a value past what PostgreSQL, pgbench, tc or Toxiproxy take is refused here,
not half-way through a run. Paths must name a directory that can be created or written,
outside pseudo file systems such as /proc and /sys.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

# Upper bounds. Each is far past any sensible benchmark, and below what the tools accept.
MAX_ROUNDS = 1000                       # --repeat
MAX_SEED = 2**63 - 1                    # run.seed is a bigint
MAX_INT = 2**31 - 1                     # a PostgreSQL integer, an int of pgbench or a client
MAX_DURATION_S = 86_400                 # one measurement: a day
MAX_BACK = 1_000_000                    # latest~N
MAXIMA = {                              # whole(..., what=X) without an explicit bound
    "clients": 1000,                    # pgbench -c (each needs a server connection)
    "rows": 1_000_000_000,              # a table of 10^9 rows is hundreds of GB
    "seconds": 604_800,                 # a week (statement_timeout in ms stays an int)
    "tries": 1000,                      # pgbench --max-tries
    "scale": 10_000,                    # pgbench -s 10000: 10^9 accounts, ~150 GB
}
MAX_LATENCY_MS = 10_000                 # an emulated link adding 10 s per round trip
MAX_BANDWIDTH_KBIT = 100_000_000        # 100gbit
MAX_PERCENT = 1000                      # compare --fail-if-slower: B a tenth of A's speed is -90%
MAX_PATH = 800                          # below PostgreSQL's MAXPGPATH (1024) with room for data/...
PSEUDO_FS = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "devtmpfs", "debugfs", "tracefs", "securityfs",
             "configfs", "pstore", "bpf", "mqueue", "hugetlbfs", "fusectl", "binfmt_misc", "efivarfs",
             "autofs", "nsfs", "rpc_pipefs"}
RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


# -- numbers -------------------------------------------------------------------------------------
def digits(text: str) -> bool:
    """Whether text is a whole number in ASCII digits 0-9 (at most 30 of them, so int() is safe)."""
    return bool(re.fullmatch(r"[0-9]{1,30}", text))


def _too_long(text: str) -> bool:
    """More digits than any bound here has (int() of thousands of digits refuses, or takes long)."""
    return len(text.lstrip("0")) > 20


def whole(text: str, lo: int, hi: int | None = None, what: str = "", small: str | None = None) -> int:
    """A whole number from lo to hi (hi: MAXIMA[what], else MAX_INT).

    small: the message (with {v}) when text is no whole number >= lo, if a caller has its own.
    """
    hi = hi if hi is not None else MAXIMA.get(what, MAX_INT)
    of = f" of {what}" if what else ""
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(small.format(v=text) if small else
                         f"'{text}' is not a whole number{of} (digits 0-9, from {lo} to {hi})")
    if _too_long(text) or int(text) > hi:
        raise ValueError(f"'{text}' is too large: at most {hi}" + (f" {what}" if what else ""))
    if int(text) < lo:
        raise ValueError(small.format(v=text) if small else f"'{text}' is not a whole number >= {lo}{of}")
    return int(text)


def seconds(text: str, maximum: float = MAX_DURATION_S, whole_for: str | None = None) -> float | int:
    """A positive, finite number of seconds up to maximum; whole seconds only when whole_for names
    the tool that needs them (pgbench -T)."""
    try:
        x = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number of seconds") from None
    if math.isnan(x) or not x > 0:
        raise ValueError(f"must be a positive number of seconds, got {text}")
    if math.isinf(x) or x > maximum:
        raise ValueError(f"'{text}' is too long: at most {maximum:g} seconds")
    if whole_for and x != int(x):
        raise ValueError(f"{whole_for} takes whole seconds, got {text}")
    return int(x) if whole_for else x


def rows(text: str, minimum: int = 1, maximum: int = MAXIMA["rows"]) -> int:
    """A row count: 50000, 50k, 10m."""
    t = text.strip().lower()
    mult = {"k": 1000, "m": 1_000_000}.get(t[-1:], 1)
    number = t[:-1] if t[-1:] in ("k", "m") else t
    if not re.fullmatch(r"[0-9]+", number) or (not _too_long(number) and int(number) * mult < minimum):
        raise ValueError(f"'{text}' is not a row count >= {minimum} (e.g. 50000, 50k, 10m)")
    if _too_long(number) or int(number) * mult > maximum:
        raise ValueError(f"'{text}' is too large: at most {maximum:,} rows")
    return int(number) * mult


def at_most(value: int, maximum: int, text: str, what: str) -> None:
    """Refuse a parsed value above maximum (for parsers that compute their number first)."""
    if value > maximum:
        raise ValueError(f"'{text}' is too large: at most {maximum:,} {what}")


def repeat(text: str) -> int:
    return whole(text, 1, MAX_ROUNDS, small="'{v}' must be a whole number >= 1")


def seed(text: str) -> int:
    return whole(text, 0, MAX_SEED, small="'{v}' must be a whole number >= 0")


def percent(text: str, maximum: int = MAX_PERCENT) -> float:
    """A percentage more than 0 and at most maximum, in plain decimal digits ('10', '2.5')."""
    fix = f"give a number of percent more than 0 and at most {maximum}, e.g. 10 or 2.5"
    if not re.fullmatch(r"-?[0-9]{1,10}(\.[0-9]{1,10})?", text):
        raise ValueError(f"'{text}' is not a percentage in digits; {fix}")
    value = float(text)
    if value <= 0:
        raise ValueError(f"'{text}' is not more than 0; {fix}")
    if value > maximum:
        raise ValueError(f"'{text}' is too large: at most {maximum} percent; {fix}")
    return value


# -- text ----------------------------------------------------------------------------------------
def nonempty(text: str, example: str) -> str:
    if not text.strip():
        raise ValueError(f"empty value; give {example}, or leave the option out")
    return text


def run_ref(text: str) -> str:
    """A run id, 'latest' or 'latest~N' (N runs back)."""
    back = re.fullmatch(r"latest~(.*)", text)
    if back:
        n = whole(back.group(1), 0, MAX_BACK, small="'{v}' after latest~ is not a whole number")
        return f"latest~{n}" if n else "latest"
    if text != "latest" and not RUN_ID.fullmatch(text):
        raise ValueError("not a run id; give an id from 'pgpathbench runs', latest or latest~N")
    return text


EXPORT_SUFFIXES = (".json", ".json.gz")


def run_or_export(text: str) -> str:
    """run_ref, or the path of a run's export (FILE.json or FILE.json.gz: read later)."""
    if text.endswith(EXPORT_SUFFIXES):
        return text
    try:
        return run_ref(text)
    except ValueError as e:
        raise ValueError(f"{e}, or an exported FILE.json (.json.gz)") from None


def shell_words(text: str) -> list[str]:
    """'-Xmx1g -Dx="a b"' -> ['-Xmx1g', '-Dx=a b'], as a shell splits them."""
    import shlex
    try:
        return shlex.split(text)
    except ValueError:
        raise ValueError(f"'{text}': a quote is not closed; quote each value whole (e.g. -Dx=\"a b\")") from None


_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def _shown(text: str, what: str) -> str:
    """"what 'text'", or `what` alone when the text is not harmless to repeat (a DSN typed here by
    mistake holds a password)."""
    return f"{what} '{text}'" if re.fullmatch(r"[\w.:%\[\]-]{1,60}", text) else what


def port(text: str) -> int:
    if not digits(text) or not 1 <= int(text) <= 65535:
        raise ValueError(f"{_shown(text, 'the port')} is not a whole number from 1 to 65535")
    return int(text)


def host(text: str) -> str:
    """A DNS name (labels of letters, digits and '-', 253 characters at most), or an IP address."""
    import ipaddress
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    labels = text.removesuffix(".").split(".")
    if len(text) > 253 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        raise ValueError(f"{_shown(text, 'the host')} is not a host name (letters, digits, '-' and '.') or an IP "
                         "address")
    return text


def host_port(text: str) -> tuple[str, int | None]:
    """HOST[:PORT]: a host (an IPv6 address in brackets when a port follows), the port 1 to 65535."""
    text = text.strip()
    if text.startswith("["):
        inside, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{_shown(text, 'the address')} is not [IPV6]:PORT")
        address, given = inside, rest[1:] if rest else None
    elif text.count(":") > 1:   # an IPv6 address alone
        address, given = text, None
    else:
        address, sep, given = text.partition(":")
        given = given if sep else None
    return host(address), None if given is None else port(given)


def user_name(text: str) -> str:
    """An OS user name. The value is only repeated when it looks like one (a DSN typed here by
    mistake holds a password)."""
    nonempty(text, "an OS user name such as postgres")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?", text):
        raise ValueError("not a user name; give an unprivileged OS user such as postgres")
    return text


def conninfo(text: str) -> str:
    """A libpq connection string or URI, checked for syntax only; never repeated (it may hold a
    password)."""
    from psycopg.conninfo import conninfo_to_dict
    nonempty(text, "a connection string such as 'host=HOST dbname=DB user=USER'")
    try:
        conninfo_to_dict(text)
    except Exception:
        raise ValueError("not a valid connection string; use key=value pairs such as "
                         "'host=HOST port=5432 dbname=DB user=USER' or a postgresql:// URI") from None
    return text


def printable(message: str) -> str:
    """The message on one line: control characters (a newline in a value) written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


# -- paths ---------------------------------------------------------------------------------------
def _mounts() -> list[tuple[str, str]]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    decode = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)  # noqa: E731
    return [(decode(f[1]), f[2]) for f in (line.split() for line in lines) if len(f) >= 3]


def mount_of(path: Path | str) -> tuple[str, str | None]:
    """(mount point, type) of the file system holding an existing path (the longest matching mount)."""
    real = os.path.realpath(path)
    best, kind = "/", None
    for mount, fstype in _mounts():
        if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
            best, kind = mount, fstype
    return best, kind


def file_system(path: Path) -> str | None:
    """The type of the file system holding an existing path."""
    return mount_of(path)[1]


def _check_path(text: str, kind: str) -> tuple[Path, Path]:
    """(the absolute path, its nearest existing ancestor), or ValueError."""
    nonempty(text, f"a {kind} path")
    path = Path(text).expanduser().absolute()
    if "\0" in text or len(str(path).encode()) > MAX_PATH:
        raise ValueError(f"path of {len(str(path).encode())} bytes is too long: at most {MAX_PATH}; choose a shorter one")
    if any(len(p.encode()) > 255 for p in path.parts):
        raise ValueError("a name in the path is longer than 255 bytes; choose a shorter one")
    for top in ("/proc", "/sys"):
        if str(path) == top or str(path).startswith(top + "/"):
            raise ValueError(f"{top} is a pseudo file system of the kernel; choose a {kind} on a disk")
    existing = next(p for p in [path, *path.parents] if os.path.lexists(p))
    fstype = file_system(existing)
    if fstype in PSEUDO_FS:
        raise ValueError(f"{existing} is on a {fstype} pseudo file system; choose a {kind} on a disk")
    return path, existing


def directory(text: str) -> str:
    """A directory that exists and is writable, or can be created below a writable one."""
    path, existing = _check_path(text, "directory")
    if not existing.is_dir():
        raise ValueError(f"cannot write below {existing} (not a directory); choose a writable directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write below {existing}; choose a writable directory")
    return str(path)


def output_file(text: str) -> Path:
    """A file to write: its directory exists and is writable; it is not a directory itself."""
    path, existing = _check_path(text, "file")
    if path.is_dir():
        raise ValueError(f"{text} is a directory; name a file, e.g. {Path(text) / 'report.html'}")
    if path.exists() and not path.is_file():   # a device or a FIFO would be renamed over, not written
        raise ValueError(f"{text} is not a regular file; name a new file")
    if not path.parent.is_dir():
        raise ValueError(f"directory {path.parent} does not exist; create it or name another file")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write in {path.parent}; name a file in a writable directory")
    return path


def bindir(text: str) -> str:
    nonempty(text, "the bin directory of a PostgreSQL install")
    return text
