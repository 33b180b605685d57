"""tpchgen-cli's --parts cuts lineitem and orders at different order keys (seen at SF 10):
align_orders moves the orders between the two cuts, so that one bound per part fits both."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgpathbench.datasets.tpch.files import TpchFiles, align_orders


def write(path: Path, keys) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}|x|{k * 7}|\n" for k in keys))


def keys(path: Path) -> list[int]:
    return [int(line.split("|", 1)[0]) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("orders_cut", [98, 103], ids=["orders cut later", "orders cut earlier"])
def test_orders_are_cut_where_lineitem_is(tmp_path, orders_cut):
    files = TpchFiles(tmp_path, 1.0)
    d = files.parts_dir(2)
    write(d / "lineitem" / "lineitem.1.tbl", [k for k in range(1, 100) for _ in range(3)])
    write(d / "lineitem" / "lineitem.2.tbl", [k for k in range(100, 200) for _ in range(2)])
    write(d / "orders" / "orders.1.tbl", range(1, orders_cut))
    write(d / "orders" / "orders.2.tbl", range(orders_cut, 200))
    with pytest.raises(RuntimeError, match="outside part bounds"):
        files.partition_bounds(2)

    assert align_orders(d, 2) == {"orders_moved": abs(100 - orders_cut)}
    assert keys(d / "orders" / "orders.1.tbl") == list(range(1, 100))
    assert keys(d / "orders" / "orders.2.tbl") == list(range(100, 200))
    assert files.partition_bounds(2) == [(None, 100), (100, None)]
    assert align_orders(d, 2) == {"orders_moved": 0}          # aligned: nothing to move


def test_parts_cached_before_the_alignment_count_as_missing(tmp_path):
    """The disk check asks complete(): parts that ensure_parts would generate again must count as
    missing there (the SF 10 paper run's estimate left out their 9.5 GB and the disk filled up)."""
    files = TpchFiles(tmp_path, 1.0)
    d = files.parts_dir(2)
    d.mkdir(parents=True)
    assert not files.complete(2)
    (d / "complete.json").write_text('{"seconds": 1.0, "bytes": 10}')
    assert not files.complete(2)
    (d / "complete.json").write_text('{"seconds": 1.0, "bytes": 10, "orders_moved": 0}')
    assert files.complete(2)
    assert not files.complete()
    (files.dir / "complete.json").write_text('{"seconds": 1.0, "bytes": 10}')
    assert files.complete()
