"""A pgbench script's SQL commands as pgbench splits them, for the server's parse check
(servers/parse_check.py); its meta-commands (\\set, \\sleep...) are pgbench's own, checked by its dry
parse (pgbench.dry_parse).

pgbench reads a script with psql's lexer: an SQL command ends at a ';' outside quotes, comments
and parentheses, or where a backslash starts a meta-command (`\\;` and `\\:` stand for ';' and
':'); a meta-command runs to the end of its line (a backslash before the newline continues it).
In the SQL, every `:name` (a single colon, then a letter or '_') is a variable, written as a
parameter ($1, $2...) as pgbench's extended and prepared protocols send it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from .. import scratch

# Where a quoted stretch or a comment starts (E'' strings take backslash escapes; dollar quotes
# and E'' must start a token: '$' and letters continue an identifier).
_OPEN = re.compile(r"""--|/\*|(?<![\w$])[eE]'|'|"|(?<![\w$])\$(?:[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)?\$""")
_ENDS = {"'": re.compile(r"'(?!')|''", re.S), '"': re.compile(r'"(?!")|""', re.S),
         "e'": re.compile(r"\\.|'(?!')|''", re.S), "--": re.compile(r"\n")}
# What the split stops at (the lookahead first: a search skips any other character fast).
_TOKEN = re.compile(r"""(?=[-/eE'"$\\;()])(?:""" + _OPEN.pattern + r"|\\[;:]?|[;()])")
_VARIABLE = re.compile(r":(?<!::)[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*")   # not after a ':'
_META_END = re.compile(r"(?<!\\)\n")
_COMMENT = re.compile(r"/\*|\*/")
# Where the dry parse connects: a socket directory that cannot exist, so no server is ever reached.
_NOWHERE = "/nonexistent/pgpathbench-dry-parse"
_PARSED = "could not create connection for setup"
_ERROR = re.compile(r"pgbench: error: .*?([^/]+)\.sql:(\d+): (.*)")


def dry_parse(pgbench: Path | str, scripts: list[tuple[str, str, int]]) -> tuple[str, int, str] | None:
    """pgbench's own parse of scripts (name, text, weight), without a server: pgbench parses every
    -f file while reading its options, and only then connects; pointed at a socket that cannot exist
    it fails either way, and its message says which. The texts are written to a private directory
    first (pgbench reads what was checked, not the user's path again). None when they parse, else
    (name, line, pgbench's reason without what it quotes of the script: 'syntax error in command')."""
    if Path(_NOWHERE).exists():
        raise RuntimeError(f"{_NOWHERE} exists: the dry parse would reach a server")
    directory = scratch.make_dir("dryparse")
    try:
        for name, text, _ in scripts:
            (directory / f"{name}.sql").write_text(text)
        files = [a for name, _, weight in scripts for a in ("-f", f"{directory / name}.sql@{weight}")]
        cmd = [str(pgbench), "-n", *files, "-t", "1", "-h", _NOWHERE, "-p", "1", "-U", "nobody", "nobody"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if _PARSED in res.stderr:
        return None
    first = next((line for line in res.stderr.splitlines() if line.startswith("pgbench: error: ")), "")
    m = _ERROR.fullmatch(first)
    name, line, reason = (m.group(1), int(m.group(2)), m.group(3)) if m else \
        (scripts[0][0], 0, first.removeprefix("pgbench: error: "))
    # what pgbench quotes ("set", a file's path) may be the script's own text: left out
    return name, line, " ".join(re.sub(r'"[^"]*"|\S*/\S*', "", reason).split()) or f"pgbench exit {res.returncode}"


def _skip_quoted(text: str, start: int, opener: str) -> int:
    """Where the quoted stretch or comment opened at `start` by `opener` ends (past it)."""
    pos = start + len(opener)
    if opener.startswith("$"):
        end = text.find(opener, pos)
        return len(text) if end < 0 else end + len(opener)
    if opener == "/*":   # nested, as PostgreSQL's
        depth = 1
        while depth and pos < len(text):
            nxt = _COMMENT.search(text, pos)
            if nxt is None:
                return len(text)
            depth += 1 if nxt.group() == "/*" else -1
            pos = nxt.end()
        return pos
    pattern = _ENDS[opener.lower()]
    while (m := pattern.search(text, pos)) is not None:
        pos = m.end()
        if m.group() not in ("''", '""') and not m.group().startswith("\\"):
            return pos
    return len(text)


def sql_commands(script: str) -> list[tuple[int, str]]:
    """(offset in the script, SQL) of each SQL command, its ';' kept, its variables as $1, $2...;
    meta-commands left out. The script is one pgbench has parsed (dry_parse)."""
    commands: list[tuple[int, str]] = []
    start, pos, depth, parts = 0, 0, 0, []
    while (m := _TOKEN.search(script, pos)) is not None:
        parts.append(script[pos:m.start()])
        token, pos = m.group(), m.end()
        if token in ("(", ")"):
            depth = depth + 1 if token == "(" else max(depth - 1, 0)
            parts.append(token)
        elif token in ("\\;", "\\:"):   # a ';' or ':' that ends nothing
            parts.append(token[1])
        elif token == ";" and depth:
            parts.append(token)
        elif token in (";", "\\"):   # the command's end, or a meta-command's start: to the end of its line
            parts.append(";" if token == ";" else "")
            _add(commands, start, parts)
            if token == "\\":
                end = _META_END.search(script, pos)
                pos = len(script) if end is None else end.end()
            start, parts = pos, []
        else:   # a quoted stretch or a comment
            pos = _skip_quoted(script, m.start(), token)
            parts.append(script[m.start():pos])
    parts.append(script[pos:])
    _add(commands, start, parts)
    return commands


def _add(commands: list, start: int, parts: list[str]) -> None:
    sql = "".join(parts)
    if sql.strip():
        numbers = iter(range(1, len(sql) + 1))
        commands.append((start, _VARIABLE.sub(lambda m: f"${next(numbers)}", sql)))
