"""The docs keep their word (the cheap part; tests/integration/test_docs_runs.py runs the blocks that
start servers): every --option a page names exists in the --help of its command, every runnable
block that starts no server exits 0, every relative link reaches its page and heading, and the
README stays short and opens with the two commands."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from functools import cache

import pytest

from doc_pages import REPO, Mention, anchors, links, mentions, name, pages, run_block, runnable_blocks

from pgpathbench.cli_parser import build_parser
from pgpathbench.studies import STUDIES

# Options of other programs that the docs quote, each with why it is there.
OTHER_PROGRAMS = {
    "--sampling-rate": "pgbench's: how pgbench's per-transaction log is sampled (method.md, evidence)",
    "--aggregate-interval": "pgbench's: its per-second aggregate log, the exact series (method.md, evidence)",
    "--describe-config": "postgres's: how --set checks a setting's name without a server (options.md)",
    "--parts": "tpchgen-cli's: the part files of the partitioned layout (file-fdw-tpch.md)",
    "--part": "tpchgen-cli's, as --parts",
    "--porcelain": "git status's: how an export's dirty flag is read (results.md)",
    "--prebuilt": "scripts/install-citus's: install the vendored build (file-fdw-tpch.md, Citus)",
    "--source": "scripts/install-citus's, as --prebuilt",
    "--patch": "scripts/install-citus's, as --prebuilt",
    "--remove": "scripts/install-citus's: remove the tool's own PostgreSQL with Citus",
    "--scope": "systemd-run's: a run in a memory cgroup on cgroup v2 (reproduction.md, 100M rows)",
}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


@cache
def help_options() -> dict[tuple[str, ...], frozenset[str]]:
    """(command[, study]) -> the option strings its --help lists; () for `pgpathbench --help`."""
    top = build_parser()
    found = {(): frozenset(top._option_string_actions)}
    for command, parser in subparsers(top).items():
        found[(command,)] = frozenset(parser._option_string_actions)
        for study, sub in subparsers(parser).items():
            found[(command, study)] = frozenset(sub._option_string_actions)
    return found


@cache
def all_bench_options() -> dict[str, frozenset[str]]:
    """script -> the options its --help lists: its argparse declarations, read from its source
    (running six scripts that each import the tool takes a busy machine tens of seconds)."""
    return {p.stem: frozenset({"--help", *re.findall(r"add_argument\(\s*\"(--[a-z][a-z0-9-]*)\"", p.read_text())})
            for p in sorted((REPO / "bench").glob("*.py"))}


def bench_options(script: str) -> frozenset[str]:
    return all_bench_options().get(script, frozenset())


def test_bench_options_are_read_as_their_help_lists_them():
    script = REPO / "bench" / "evidence_overhead.py"
    res = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "1000"})
    assert res.returncode == 0, res.stderr
    assert bench_options("evidence_overhead") == frozenset(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", res.stdout))


def page_studies(page) -> set[str]:
    """The studies a page is about: a study page's own, and those its command lines run."""
    own = {page.stem} if page.parent.name == "studies" else set()
    return own | {m.study for m in mentions(page, set(STUDIES)) if m.study}


def scope(page) -> frozenset[str]:
    """What an option in a page's prose may be: a study page's options are its studies' (`run
    STUDY`) and every other command's; any other page may name any command's or study's option,
    bench/README.md also its scripts'."""
    options = help_options()
    studies = page_studies(page) if page.parent.name == "studies" else set(STUDIES)
    allowed = set().union(*(o for key, o in options.items() if len(key) < 2 or key[1] in studies))
    if page == REPO / "bench" / "README.md":
        allowed |= set().union(*all_bench_options().values())
    return frozenset(allowed | set(OTHER_PROGRAMS))


def unknown(m: Mention) -> bool:
    if m.script:
        return m.option not in bench_options(m.script)
    if m.cmd:
        return m.option not in help_options()[(m.cmd, m.study) if m.study else (m.cmd,)]
    return m.option not in scope(m.page)


def test_every_page_is_there():
    names = {name(p) for p in pages()}
    assert {"README.md", "docs/options.md", "docs/method.md", "docs/servers.md", "docs/results.md",
            "docs/reproduction.md", "bench/README.md"} <= names
    assert {f"docs/studies/{s}.md" for s in STUDIES} <= names


def test_readme_is_short_and_opens_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to docs/"
    assert lines[2] == "```sh" and lines[3].startswith("make demo ") and lines[4].startswith("make test ")


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_option_a_page_names_is_in_the_help_of_its_command(page):
    found = mentions(page, set(STUDIES))
    assert [str(m) for m in found if unknown(m)] == [], "options no --help lists (see tests/doc_pages.py)"


def test_options_are_found_in_commands_and_in_prose():
    """The reading itself: a command line's options go to its command, the rest to the page."""
    found = mentions(REPO / "docs" / "studies" / "fdw-overhead.md", set(STUDIES))
    assert any(m.cmd == "run" and m.study == "fdw-overhead" and m.option == "--fdw-option" for m in found)
    assert any(m.cmd is None and m.option == "--script-tables" for m in found)
    assert any(m.cmd == "report" and m.option == "--wide" for m in found)


def test_an_option_of_another_command_or_of_none_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```sh\npgpathbench report latest --fail-if-slower 10   # compare's, not report's\n"
                    "pgpathbench compare A B --fail-if-slower 10\n"
                    "pgpathbench run fdw-overhead --fetch 100\n```\n"
                    "Prose may name `--fetch` (interfaces') but not `--no-such-option`.\n")
    assert [m.option for m in mentions(page, set(STUDIES)) if unknown(m)] == [
        "--fail-if-slower", "--fetch", "--no-such-option"]


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_relative_link_reaches_its_page_and_heading(page):
    broken = []
    for line, target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(f"{name(page)}:{line}: {target}")
    assert broken == []


def test_runnable_blocks_are_marked_and_some_start_a_run():
    blocks = runnable_blocks()
    assert any(b.page.name == "README.md" for b in blocks)
    assert any(b.cheap for b in blocks) and any(not b.cheap for b in blocks)


@pytest.mark.parametrize("block", [b for b in runnable_blocks() if b.cheap], ids=str)
def test_cheap_runnable_block_exits_0(block):
    res = run_block(block, timeout=120)
    assert res.returncode == 0, f"{block}: exit {res.returncode}\n{res.stderr[-2000:]}"
    assert res.stdout.strip(), f"{block} printed nothing"
