"""`--host` forms and the ssh config every ssh of ours reads (servers/hosts.py, servers/ssh_route.py).

No host is connected: `ssh -G` prints the options ssh would use, the real OpenSSH's answer to
whether our options still win over a user's config that sets the same ones (ssh keeps the first
value it reads), and what an alias resolves to. Connections through a jump host:
tests/integration/test_ssh_config.py.
"""

from __future__ import annotations

import socket
import subprocess

import pytest

from pgpathbench.errors import UserError
from pgpathbench.servers.hosts import SshSettings, parse_host
from pgpathbench.servers.ssh_route import Route, resolve, source_address, unreachable


@pytest.mark.parametrize("given, destination", [
    ("b=ssh://bench@10.0.0.2", "ssh://bench@10.0.0.2"),       # no port: the config's Port, or 22
    ("b=ssh://bench@10.0.0.2:2222/", "ssh://bench@10.0.0.2:2222"),
    ("b=ssh://balias", "ssh://balias"),                       # no user: the config's User
    ("b=ssh://balias:22", "ssh://balias:22"),
    ("b=balias", "balias"),
    ("b=ssh://u@[::1]:22", "ssh://u@[::1]:22"),
])
def test_a_host_keeps_what_was_given_and_leaves_the_rest_to_the_ssh_config(given, destination):
    assert parse_host(given).destination == destination


def ssh_G(config_text: str, destination: str) -> dict[str, list[str]]:
    """keyword -> its values (IdentityFile adds up), as ssh would use them."""
    res = subprocess.run(["ssh", "-G", "-F", "/dev/stdin", destination], input=config_text, capture_output=True,
                         text=True, check=True)
    seen: dict[str, list[str]] = {}
    for key, _, value in (line.partition(" ") for line in res.stdout.splitlines()):
        seen.setdefault(key, []).append(value)
    return seen


USERS = """Host balias
  HostName 10.0.0.2
  User bench
  Port 2222
  IdentityFile ~/.ssh/bench_key
  ProxyJump aalias
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode no
  ControlMaster auto
  ControlPath ~/.ssh/cm-%C
  ControlPersist 10m
"""


def settings(tmp_path, accept=(), identity=True) -> SshSettings:
    config = tmp_path / "config"
    config.write_text(USERS)
    key = tmp_path / "key"
    key.write_text("not a key: ssh -G does not read it\n")
    return SshSettings.checked(tmp_path / "ws", str(key) if identity else None, accept, {"b": parse_host("b=balias")},
                               str(config))


def test_our_options_win_over_the_users_config_and_its_aliases_still_resolve(tmp_path):
    ours = settings(tmp_path)
    seen = {k: v[0] for k, v in ssh_G(ours.ssh_config("b"), "balias").items()}
    assert (seen["hostname"], seen["user"], seen["port"], seen["proxyjump"]) == ("10.0.0.2", "bench", "2222", "aalias")
    assert seen["stricthostkeychecking"] == "true" and seen["batchmode"] == "yes"
    assert seen["userknownhostsfile"].split()[0] == str(tmp_path / "ws" / "known_hosts")
    assert (seen["controlmaster"], seen["controlpersist"], "controlpath" in seen) == ("false", "no", False)
    assert seen["identitiesonly"] == "yes"
    # --ssh-identity's key and the alias's own IdentityFile, both offered
    assert ssh_G(ours.ssh_config("b"), "balias")["identityfile"] == [str(tmp_path / "key"), "~/.ssh/bench_key"]
    # an accepted host: new keys are accepted on its way (its jump hosts read the same file)
    assert ssh_G(settings(tmp_path, accept=("b",)).ssh_config("b"), "balias")["stricthostkeychecking"] == \
        ["accept-new"]


def test_without_ssh_config_openssh_default_files_are_included(tmp_path):
    text = SshSettings(tmp_path).ssh_config("b")
    assert text.splitlines()[-2:] == ["Include ~/.ssh/config", "Include /etc/ssh/ssh_config"]
    assert "IdentityFile" not in text


def test_resolve_reads_the_alias_and_names_a_proxycommand_without_its_command(tmp_path):
    config = tmp_path / "ours"
    config.write_text(settings(tmp_path, identity=False).ssh_config("b"))
    assert resolve(config, "ssh://balias", "--ssh-config") == Route("10.0.0.2", 2222, "bench", "aalias")
    assert resolve(config, "ssh://u@10.0.0.9:23", "--ssh-config") == Route("10.0.0.9", 23, "u", None)
    config.write_text("Host p\n  ProxyCommand nc -X connect -x proxy:3128 %h %p\n")
    route = resolve(config, "p", "--host p")
    assert route.via == "a ProxyCommand" and "proxy:3128" not in route.shown


def test_a_config_ssh_refuses_names_its_line(tmp_path):
    config = tmp_path / "ours"
    config.write_text("Host b\n  NoSuchOption 1\n")
    with pytest.raises(UserError, match=r"^--ssh-config: ssh cannot read its configuration \(.*line 2: Bad "
                                        r"configuration option: nosuchoption"):
        resolve(config, "b", "--ssh-config")


def test_the_source_address_and_the_probe_on_loopback():
    assert source_address("127.0.0.1") == "127.0.0.1"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # bound, not listening: refused
        assert unreachable("127.0.0.1", port) is None
        s.listen()
        assert unreachable("127.0.0.1", port) is None


def test_a_path_that_cannot_go_into_an_ssh_config_is_refused(tmp_path):
    odd = tmp_path / 'a"b'
    odd.write_text("Host b\n")
    with pytest.raises(UserError, match='^--ssh-config: .*double quote'):
        SshSettings.checked(tmp_path, None, (), {}, str(odd))
