"""A user's files: read within a bound, written so that nobody ever sees half of one.

Whatever a user names as a file to read (a script, a query, an export) is read by one rule:
a regular file (a FIFO, a device, a directory or a socket is refused before it is read, and
opening one never blocks), at most `limit` bytes (at most limit + 1 are ever read, whatever its
size claims: /proc's files say 0), and for text, UTF-8 without NUL or other control characters
but the blanks (tab, newline, vertical tab, form feed, carriage return). A refusal says which
rule the file breaks and never quotes what it holds.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_NOT_TEXT = re.compile(r"[\x00-\x08\x0e-\x1f]")   # C0 controls but \t \n \v \f \r (SQL's blanks)


def size_text(limit: int) -> str:
    """1048576 -> '1 MiB' (a bound as --help and the refusals state it)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def read_bounded(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; ValueError naming the rule it breaks
    (`what` names the fix: 'a pgbench script')."""
    path = Path(path).expanduser()
    try:
        mode = os.stat(path).st_mode   # before opening: opening a device may do something
        if not stat.S_ISREG(mode):
            raise ValueError(f"{path} is {_kind(mode)}; give {what}, a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}; give {what}, a readable regular file") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)   # what was opened, which may not be what was looked at
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is {_kind(st.st_mode)}; give {what}, a regular file")
        if st.st_size > limit:
            raise ValueError(f"{path} is over {size_text(limit)}; give {what} of at most {size_text(limit)}")
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise ValueError(f"cannot read {path}: {e.strerror}; give {what}, a readable regular file") from None
    if len(data) > limit:
        raise ValueError(f"{path} is over {size_text(limit)}; give {what} of at most {size_text(limit)}")
    return data


def text_of(data: bytes, path: str | Path, what: str) -> str:
    """The bytes as text: UTF-8 without NUL or another control character but a blank; ValueError
    naming the rule, never the content."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (byte {e.start + 1} is not); give {what} saved as "
                         "UTF-8 text") from None
    bad = _NOT_TEXT.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        raise ValueError(f"{path} is not text (line {line} holds control character "
                         f"U+{ord(bad.group()):04X}); give {what}, a text file")
    return text


def read_text(path: str | Path, limit: int, what: str) -> str:
    """A user's text file by the module's rule: read_bounded, then text_of."""
    return text_of(read_bounded(path, limit, what), Path(path).expanduser(), what)


def write_atomically(target: Path, text: str, overwrite: bool = True, private: bool = False) -> None:
    """A temporary file beside the target, renamed over it: readers never see half a file.
    overwrite=False: FileExistsError if the target exists, even if it appeared meanwhile.
    private: 0600 from its creation on (a password file: never readable by others, not even for a moment)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")   # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        if overwrite:
            os.replace(tmp, target)
        else:
            _link_new(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _link_new(tmp: str, target: Path) -> None:
    """tmp as the new file target: a hard link fails if target exists (no window in which it is
    replaced); where there are no hard links (vfat), checked, then renamed."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "File exists", str(target)) from None
        os.replace(tmp, target)
