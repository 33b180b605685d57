"""The user's own queries (`--query NAME=SQL`, `--query-file NAME=FILE`): parsed and checked before
anything is written, kept in the run's options as {NAME: SQL} (a file is read once, here: a
resumed run measures the text it measured, whatever the file holds by then).

What can be checked without a server is checked here: NAME a simple lower-case identifier that
does not clash with the study's own queries; SQL not empty, one statement (a `;` outside quotes,
comments and dollar quotes may only end it), starting with a keyword of a statement that returns
rows (SELECT, WITH, VALUES, TABLE, or a parenthesis); a file by files.read_text's rule, of at most
1 MiB. That the server accepts the text, that it returns rows and that it only reads is checked
by the study in prepare(), in a read-only transaction, before anything is measured (a UserError:
exit 2).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping

from . import files
from .matrix import Parameter

NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")
MAX_FILE_BYTES = 1 << 20
ROW_KEYWORDS = ("select", "with", "values", "table")
# What may open a quoted stretch in which a ';' does not end the statement.
_QUOTED = re.compile(r"""'(?:[^']|'')*'?|"(?:[^"]|"")*"?|--[^\n]*|/\*.*?(?:\*/|$)|\$([A-Za-z_]\w*)?\$""", re.S)


def _strip_quoted(sql: str) -> str:
    """The text with every comment blanked and every literal, quoted identifier and dollar-quoted
    body replaced by x's (as many: positions stay those of the text)."""
    out, pos = [], 0
    while (m := _QUOTED.search(sql, pos)) is not None:
        out.append(sql[pos:m.start()])
        if m.group(0).startswith("$"):
            end = sql.find(m.group(0), m.end())
            pos = len(sql) if end < 0 else end + len(m.group(0))
        else:
            pos = max(m.end(), m.start() + 1)
        out.append((" " if m.group(0)[:2] in ("--", "/*") else "x") * (pos - m.start()))
    out.append(sql[pos:])
    return "".join(out)


def check_sql(sql: str) -> str:
    """The statement without its trailing ';' and blanks; ValueError saying what is wrong."""
    bare = _strip_quoted(sql)
    if not bare.strip(" \t\r\n;"):
        raise ValueError("the SQL is empty; give a query that returns rows (SELECT ...)")
    body = bare.rstrip(" \t\r\n;")
    if ";" in body:
        raise ValueError("the SQL holds more than one statement (a ';' outside quotes); give one query")
    first = re.match(r"\s*(\(|[A-Za-z]+)", body)
    if first is None or first.group(1).lower() not in (*ROW_KEYWORDS, "("):
        raise ValueError("the SQL must be one query that returns rows, starting with SELECT, WITH, VALUES or TABLE")
    return sql[len(body) - len(body.lstrip()):len(body)]   # without a trailing ';' or comment


def _split(raw: str, value: str) -> tuple[str, str]:
    name, sep, rest = raw.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"give NAME={value}, e.g. mine=" + ("'select ...'" if value == "SQL" else "query.sql"))
    if not NAME.fullmatch(name):
        raise ValueError(f"name '{name[:40]}' is not a simple lower-case identifier (a-z, 0-9, _; up to 40 "
                         "characters); give another NAME")
    return name, rest


def read_sql_file(name: str, path_text: str) -> str:
    try:
        return files.read_text(path_text.strip(), MAX_FILE_BYTES, "a file holding one query")
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def parser(reserved: Callable[[str], bool], from_file: bool) -> Callable[[Iterable[str]], dict[str, str]]:
    """The parse of a repeatable option: ['a=...', 'b=...'] -> {'a': SQL, 'b': SQL}. `reserved(name)`
    says whether a name is the study's own (its queries)."""
    def parse(raws: Iterable[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for raw in [raws] if isinstance(raws, str) else raws:
            name, rest = _split(raw, "FILE" if from_file else "SQL")
            if reserved(name):
                raise ValueError(f"name '{name}' is one of the study's own queries; give another NAME")
            if name in out:
                raise ValueError(f"name '{name}' is given twice; give each query its own NAME")
            sql = read_sql_file(name, rest) if from_file else rest
            try:
                out[name] = check_sql(sql)
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
        return out
    return parse


def parameters(reserved: Callable[[str], bool], what: str, inline: bool = True) -> dict[str, Parameter]:
    """The study's repeatable parameters: query (NAME=SQL) if inline, and query_file (NAME=FILE)."""
    out = {}
    if inline:
        out["query"] = Parameter("query", f"NAME=SQL: your own query ({what}); repeatable; it must only read",
                                 parser(reserved, False), repeatable=True)
    out["query_file"] = Parameter("query_file", f"NAME=FILE: your own query from a UTF-8 text file of at most "
                                  f"{files.size_text(MAX_FILE_BYTES)} ({what}); "
                                  "repeatable; it must only read", parser(reserved, True), repeatable=True)
    return out


def given(params: Mapping) -> dict[str, str]:
    """{NAME: SQL} of every --query and --query-file of a run (ValueError when a NAME is in both)."""
    inline, files = params.get("query") or {}, params.get("query_file") or {}
    both = sorted(set(inline) & set(files))
    if both:
        raise ValueError(f"name '{both[0]}' is given by --query and by --query-file; give each query its own NAME")
    return {**inline, **files}


def tables_named(sql: str, tables: Iterable[str]) -> list[str]:
    """Which of `tables` the text names, by word (outside literals and comments)."""
    words = set(re.findall(r"[a-z_][a-z0-9_$]*", _strip_quoted(sql).lower()))
    return [t for t in tables if t in words]
