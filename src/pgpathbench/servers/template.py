"""A pristine data directory per set of binaries and server user, made by initdb once per workspace
and copied for every new cluster (Cluster.template): a copy of its 40 MB (cp -a, a reflink where
the file system has them) costs 0.2 s where initdb costs 1-4 s here, and a run starts two or three
clusters.

The template is initdb's output as it was, never started, with no password: a copy gets its
cluster's own password at its first start (Cluster._store_password_for_auth), before which the
superuser cannot log in over TCP at all (pg_hba.conf asks a password there). Its key covers what
initdb's output depends on: the binaries (their directory, and initdb's and postgres's size and
change time, so an upgrade of the package makes a new one), the options below, and the owner. A
template exists only whole: made aside, then renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..procs import OsUser
from .binaries import PgBinaries

# What every cluster is initialised with (Cluster adds its password when it runs initdb itself).
INITDB_OPTIONS = ("--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
INCLUDE = "\ninclude_if_exists 'pgpathbench.conf'\n"   # appended to postgresql.conf: our settings' file


def key(bins: PgBinaries, user: OsUser, superuser: str) -> str:
    tools = [os.stat(bins.path(t)) for t in ("initdb", "postgres")]
    facts = [str(bins.bindir.resolve()), *(f"{s.st_size}:{s.st_mtime_ns}" for s in tools), *INITDB_OPTIONS,
             superuser, str(user.uid)]
    return hashlib.sha1("\0".join(facts).encode()).hexdigest()[:16]


def initdb(bins: PgBinaries, user: OsUser, data: Path, superuser: str, *extra: str) -> subprocess.CompletedProcess:
    """initdb into `data` (which must not exist) as the server user, with postgresql.conf including ours."""
    res = user.run([str(bins.path("initdb")), "-D", str(data), "-U", superuser, *INITDB_OPTIONS, *extra],
                   capture_output=True, text=True)
    if res.returncode == 0:
        with open(data / "postgresql.conf", "a") as f:
            f.write(INCLUDE)
    return res


def copy_pristine(templates: Path, bins: PgBinaries, user: OsUser, superuser: str, data: Path) \
        -> subprocess.CompletedProcess:
    """The template copied to `data` (which must not exist) by the server user, modes kept (the
    template made first if missing): cp's result, or initdb's when the template could not be made."""
    made = _pristine(templates, bins, user, superuser)
    if isinstance(made, subprocess.CompletedProcess):
        return made
    return user.run(["cp", "-a", "--reflink=auto", str(made), str(data)], capture_output=True, text=True)


def _pristine(templates: Path, bins: PgBinaries, user: OsUser, superuser: str) -> Path | subprocess.CompletedProcess:
    """The template's data directory, made now if missing; initdb's failed result if it could not be."""
    final = templates / key(bins, user, superuser)
    if (final / "data" / "PG_VERSION").exists():
        return final / "data"
    templates.mkdir(parents=True, exist_ok=True)
    os.chmod(templates, 0o711)   # the server user reaches its own template below
    staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=templates))
    try:
        os.chmod(staging, 0o700)
        user.chown(staging)
        res = initdb(bins, user, staging / "data", superuser)
        if res.returncode != 0:
            return res
        try:
            os.rename(staging, final)
        except OSError:   # another process made it meanwhile: theirs is as good
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final / "data"
