"""The CPU's signature (x86 family, model, stepping): read the same here and over SSH, shown beside
the model name, and a difference `compare` names; 'AMD EPYC' alone names two machine kinds here
(bench/README.md, issue 43)."""

import subprocess
from pathlib import Path

import pytest

from pgpathbench.environment import cpu_signature, host_fingerprint
from pgpathbench.report.compare import environment_differences
from pgpathbench.results.fingerprint import cpu_text
from pgpathbench.servers.host_facts import FACTS_SCRIPT, HostFacts

from test_compare import run

X86 = "cpu family" in Path("/proc/cpuinfo").read_text()
ZEN2, ZEN4 = "family 23 model 49 stepping 0", "family 25 model 17 stepping 1"


@pytest.mark.skipif(not X86, reason="/proc/cpuinfo has no x86 family here")
def test_the_host_facts_script_reads_the_signature_this_machine_records():
    facts = HostFacts.parse(subprocess.run(["sh", "-c", FACTS_SCRIPT], capture_output=True, text=True,
                                           timeout=60).stdout)
    signature = facts.fingerprint()["cpu_signature"]
    assert signature == cpu_signature() == host_fingerprint()["cpu_signature"]
    family, model, stepping = (int(signature.split()[i]) for i in (1, 3, 5))
    assert family >= 6 and model >= 0 and stepping >= 0, signature


def test_the_signature_is_shown_beside_the_model_where_recorded():
    assert cpu_text({"cpu_model": "AMD EPYC", "cpu_signature": ZEN4}) == f"AMD EPYC ({ZEN4})"
    assert cpu_text({"cpu_model": "AMD EPYC", "cpu_signature": None}) == cpu_text({"cpu_model": "AMD EPYC"}) \
        == "AMD EPYC"


def machine_run(run_id: str, signature: str | None = None, host_signature: str | None = None) -> dict:
    """A run of one session (fingerprint version 2) on an 'AMD EPYC', its server on host h1."""
    host = {"host": "h1", "machine_id": "m1", "cpu_model": "AMD EPYC", "cpu_signature": host_signature}
    fp = {"version": 2, "machine": {"cpu_model": "AMD EPYC", "cores": 2, "cpu_signature": signature},
          "servers": {"source": {"version": "PostgreSQL 15.18", "host": host}}}
    return run(run_id, sessions=[fp])


def test_two_kinds_of_one_model_name_differ_and_a_run_recorded_before_signatures_does_not():
    zen2, zen4 = machine_run("A", ZEN2), machine_run("B", ZEN4)
    assert environment_differences(zen2, zen4) == [f"machine: CPU signature {ZEN2} vs {ZEN4}"]
    assert environment_differences(machine_run("C"), zen4) == environment_differences(zen4, zen4) == []


def test_a_hosts_signature_is_a_difference_of_its_server():
    assert environment_differences(machine_run("A", host_signature=ZEN2), machine_run("B", host_signature=ZEN4)) \
        == [f"server source: host CPU signature {ZEN2} vs {ZEN4}"]
    assert environment_differences(machine_run("A"), machine_run("B", host_signature=ZEN4)) == []
