"""Network paths to a role's server, as values.

A path is (PostgreSQL major, role, added latency, hops): `NetworkPath("15", "source", "5ms")`. Its id
(`pg15_source_5ms`) names it everywhere: the link the topology builds for it, the probes of its
round trip, the measurements that crossed it, the reports. The latency dimension's values
('0ms', '5ms') are read here and nowhere else; the measured round trip of a path is the
result model's (results/model.py: RunResult.rtt).

Hops are what else the path crosses, in order from the client: a pooler in front of the server
(`pgbouncer-transaction`), a pooler in front of the FDW hop's source (`fdw-pgbouncer-session`). A
path without hops keeps the id it always had; each hop is appended (`pg15_source_0ms_pgbouncer-transaction`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

DIRECT = "0ms"   # the latency value of a direct path (no emulated link)


def latency_ms(value: str) -> int:
    """A latency dimension value ('0ms', '5ms', as matrix-validated) -> whole milliseconds."""
    if not value.endswith("ms") or not value[:-2].isdigit():
        raise ValueError(f"latency value '{value}': expected whole milliseconds such as 5ms")
    return int(value[:-2])


@dataclass(frozen=True)
class NetworkPath:
    major: str            # PostgreSQL major of the servers at both ends ("15")
    role: str             # the role the path leads to: "source", "remote", "local"
    latency: str = DIRECT  # the latency dimension's value: added round trip of an emulated link
    hops: tuple[str, ...] = ()   # poolers on the path, from the client (`pgbouncer-transaction`)

    @property
    def latency_ms(self) -> int:
        return latency_ms(self.latency)

    @property
    def direct(self) -> bool:
        return self.latency_ms == 0

    @property
    def id(self) -> str:
        return f"pg{self.major}_{self.role}_{self.latency_ms}ms" + "".join(f"_{h}" for h in self.hops)

    def describe(self, rtt: Mapping[str, float]) -> str:
        """'direct, 0.02 ms' or '2ms link, 2.33 ms': the path with its measured round trip."""
        where = ("direct" if self.direct else f"{self.latency_ms}ms link") + "".join(
            f" + {hop_text(h)}" for h in self.hops)
        measured = rtt.get(self.id)
        return f"{where}, {measured:.2f} ms" if measured is not None else where


def pooler_hop(pool_mode: str, fdw: bool = False) -> str:
    """The hop of a PgBouncer in `pool_mode`: in front of the server the client reaches, or (fdw) in
    front of the source postgres_fdw reaches."""
    return f"{'fdw-' if fdw else ''}pgbouncer-{pool_mode}"


def hop_text(hop: str) -> str:
    """'pgbouncer-transaction' -> 'PgBouncer (transaction)'; 'fdw-pgbouncer-session' -> 'FDW via PgBouncer (session)'."""
    fdw = hop.startswith("fdw-")
    name, _, mode = hop.removeprefix("fdw-").partition("-")
    text = ("PgBouncer" if name == "pgbouncer" else name) + (f" ({mode})" if mode else "")
    return f"FDW via {text}" if fdw else text
