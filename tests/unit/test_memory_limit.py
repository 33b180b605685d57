"""The memory a run may use: its cgroup's limit (v1 and v2 files laid out as the kernel does),
recorded beside the machine's memory and shown wherever the machine is."""

from pathlib import Path

from pgpathbench.environment import _memory_bytes, host_fingerprint, memory_limit_bytes
from pgpathbench.results.fingerprint import Fingerprint, memory_text

GIB = 2 ** 30


def limit_file(root: Path, cgroup: str, name: str, text: str) -> None:
    d = root.joinpath(*[p for p in cgroup.split("/") if p])
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text + "\n")


def test_v1_lowest_limit_of_the_cgroup_and_its_ancestors(tmp_path):
    root = tmp_path / "memory"
    limit_file(root, "/", "memory.limit_in_bytes", "9223372036854771712")   # v1's "unlimited"
    limit_file(root, "/bench", "memory.limit_in_bytes", str(8 * GIB))
    limit_file(root, "/bench/run", "memory.limit_in_bytes", str(12 * GIB))
    files = (("memory", root, "memory.limit_in_bytes"),)
    proc = "9:name=systemd:/\n4:memory:/bench/run\n3:cpu,cpuacct:/\n0::/\n"
    assert memory_limit_bytes(proc, files) == 8 * GIB
    assert memory_limit_bytes("4:memory:/\n", files) is None   # the root's limit is no limit


def test_v2_max_means_unlimited(tmp_path):
    files = (("", tmp_path, "memory.max"),)
    limit_file(tmp_path, "/run", "memory.max", "max")
    assert memory_limit_bytes("0::/run\n", files) is None
    limit_file(tmp_path, "/run", "memory.max", str(4 * GIB))
    assert memory_limit_bytes("0::/run\n", files) == 4 * GIB


def test_a_limit_above_the_machine_is_none(tmp_path):
    files = (("", tmp_path, "memory.max"),)
    limit_file(tmp_path, "/run", "memory.max", str(_memory_bytes() + GIB))
    assert memory_limit_bytes("0::/run\n", files) is None
    assert memory_limit_bytes("0::/gone\n", files) is None   # no file: no limit known


def test_the_fingerprint_records_it_and_reports_say_it():
    assert "memory_limit_bytes" in host_fingerprint()
    assert memory_text({"memory_bytes": 23.5 * GIB}) == "23.5 GiB"
    assert memory_text({"memory_bytes": 23.5 * GIB, "memory_limit_bytes": 8 * GIB}) == \
        "23.5 GiB, of which the run's cgroup may use 8.0 GiB"
    assert memory_text({}) == "—"
    fp = Fingerprint.from_json({"memory_bytes": 8 * GIB, "memory_limit_bytes": 4 * GIB})   # version 1
    assert fp.machine == {"memory_bytes": 8 * GIB, "memory_limit_bytes": 4 * GIB}
