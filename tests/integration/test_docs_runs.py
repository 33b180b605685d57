"""The docs' runnable blocks that start servers (a quick run with --repeat 1, then its report and
export) run as a reader would type them, each in a throwaway workspace, and exit 0; the cheap ones
are tests/cli/test_docs.py's. What the run measured is the study tests' to check: here, that the
page's commands work as written, and leave no server behind."""

from __future__ import annotations

import pytest

from conftest import cmdlines, workspace_base
from doc_pages import run_block, runnable_blocks

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("block", [b for b in runnable_blocks() if not b.cheap], ids=str)
def test_runnable_block_exits_0(block):
    res = run_block(block, timeout=600)
    assert res.returncode == 0, f"{block}: exit {res.returncode}\n{res.stderr[-3000:]}"
    assert res.stdout.strip(), f"{block} printed nothing"
    # this checkout's throwaway workspaces only: a suite running beside this one has its own
    ours = f"{workspace_base()}/docs-"
    assert not [c for c in cmdlines().values() if ours in c], "a server outlived its block"
