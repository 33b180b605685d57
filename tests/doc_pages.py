"""The docs as their tests read them (tests/cli/test_docs.py, tests/integration/test_docs_runs.py):
the pages, their fenced blocks, the blocks marked runnable (info string `sh runnable`), the
`--options` each page names and the command each belongs to, and running a block the way a
reader would: in a shell, in a throwaway workspace."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from conftest import workspace_base

REPO = Path(__file__).resolve().parent.parent
RUNNABLE = "sh runnable"
COMMANDS = ("run", "studies", "runs", "report", "export", "compare", "doctor", "clean")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# `pgpathbench CMD [STUDY]`, or an inline code span that starts with a command: `report --wide`.
COMMAND = re.compile(r"\bpgpathbench\s+(?P<cmd>[a-z][a-z-]*)(?:\s+(?P<study>[a-z][a-z-]*))?")
INLINE_COMMAND = re.compile(rf"^(?P<cmd>{'|'.join(COMMANDS)})(?:\s+(?P<study>[a-z][a-z-]*))?\s")
BENCH = re.compile(r"\bbench/(?P<script>\w+)\.py\b")
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def pages() -> list[Path]:
    """Every page the docs test holds to its word."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted((REPO / "docs" / "studies").glob("*.md")), REPO / "bench" / "README.md"]


def name(page: Path) -> str:
    return str(page.relative_to(REPO))


@dataclass(frozen=True)
class Block:
    page: Path
    line: int          # 1-based line of the opening fence
    info: str          # the fence's info string: "sh", "sh runnable", ""
    text: str

    def __str__(self) -> str:
        return f"{name(self.page)}:{self.line}"

    @property
    def commands(self) -> list[str]:
        """The block's shell commands, backslash continuations joined, comments left out."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        return [c for c in (line.split(" #")[0].strip() for line in joined.splitlines()) if c and c[0] != "#"]

    @property
    def cheap(self) -> bool:
        """Starts no server and touches no workspace: `studies`, and help or version only."""
        return all(re.fullmatch(r"pgpathbench( studies\b.*| .*--(help|version)\b.*|)", c) for c in self.commands)


def blocks(page: Path) -> list[Block]:
    """The fenced blocks (```) of a page, in order."""
    found, fence, start, body = [], None, 0, []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if fence is None and line.lstrip().startswith("```"):
            fence, start, body = line.strip()[3:].strip(), number, []
        elif fence is not None and line.strip() == "```":
            found.append(Block(page, start, fence, "\n".join(body) + "\n"))
            fence = None
        elif fence is not None:
            body.append(line)
    return found


def runnable_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p) if b.info == RUNNABLE]


@dataclass(frozen=True)
class Mention:
    """An --option a page names: in a command (`cmd`, `study`, or a bench script), or in prose."""
    page: Path
    line: int
    option: str
    cmd: str | None = None
    study: str | None = None
    script: str | None = None

    def __str__(self) -> str:
        where = (f"bench/{self.script}.py" if self.script else
                 f"pgpathbench {self.cmd}" + (f" {self.study}" if self.study else "") if self.cmd else "its page")
        return f"{name(self.page)}:{self.line}: {self.option} (in {where})"


def mentions(page: Path, studies: set[str]) -> list[Mention]:
    """Every --option of a page, each with the command it is given to where code says so (a fenced
    or indented code line, an inline code span: `pgpathbench run STUDY ... --x`, `report --wide`,
    `bench/x.py --y`), up to the end of that line or span or a `#` comment; the others are prose."""
    found = []
    lines = page.read_text().splitlines()
    number, fenced = 0, False
    while number < len(lines):
        first, text = number + 1, lines[number]
        number += 1
        if text.lstrip().startswith("```"):
            fenced = not fenced
            continue
        code = fenced or text.startswith("    ")
        while code and text.endswith("\\") and number < len(lines):   # a shell continuation: one command
            text = text[:-1] + " " + lines[number].strip()
            number += 1
        for i, segment in enumerate(text.split("`")):
            for part in re.split(r"\s#\s", segment):
                found += _part_mentions(page, first, part, code or i % 2 == 1, i % 2 == 1, studies)
    return found


def _part_mentions(page: Path, line: int, part: str, code: bool, inline: bool, studies: set[str]) -> list[Mention]:
    out, start = [], len(part)
    command = (COMMAND.search(part) or (INLINE_COMMAND.match(part + " ") if inline else None)) if code else None
    bench = BENCH.search(part) if code else None
    if command and command.group("cmd") in COMMANDS:
        start = command.start()
        study = command.group("study") if command.group("cmd") == "run" else None
        for option in OPTION.findall(part[command.end():]):
            out.append(Mention(page, line, option, command.group("cmd"), study if study in studies else None))
    elif bench:
        start = bench.start()
        out += [Mention(page, line, o, script=bench.group("script")) for o in OPTION.findall(part[bench.end():])]
    out += [Mention(page, line, o) for o in OPTION.findall(part[:start])]
    return out


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative markdown link of a page."""
    return [(n, m.group("target")) for n, line in enumerate(page.read_text().splitlines(), 1)
            for m in LINK.finditer(line) if not re.match(r"[a-z]+:", m.group("target"))]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but - and _ dropped,
    spaces to hyphens."""
    found = set()
    for line in page.read_text().splitlines():
        if re.match(r"#{1,6} ", line):
            text = line.lstrip("#").strip().replace("`", "").lower()
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def run_block(block: Block, timeout: float = 600) -> subprocess.CompletedProcess:
    """The block in bash (-e: every command must succeed), as a reader would type it: pgpathbench
    on the PATH, in a throwaway workspace that is its working directory too, removed after (in the
    suite's folder, conftest.workspace_base: servers run as another user, who cannot enter pytest's
    0700 temp dirs)."""
    home = workspace_base() / f"docs-{os.getpid()}-{secrets.token_hex(3)}"
    home.mkdir(parents=True)
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "PGPATHBENCH_HOME": str(home),
           "COLUMNS": "200"}
    try:
        return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=home, env=env,
                              capture_output=True, text=True, timeout=timeout)
    finally:
        if (home / "results").exists() or (home / "servers").exists():
            subprocess.run([str(bindir / "pgpathbench"), "clean", "--all"], env=env, capture_output=True, timeout=300)
        shutil.rmtree(home, ignore_errors=True)
