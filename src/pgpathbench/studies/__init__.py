"""The registry of studies, by name."""

from __future__ import annotations

from ..errors import UserError
from ..results import upgrade
from .base import Study
from .fdw_overhead import FdwOverhead
from .file_fdw_tpch import FileFdwTpch
from .interfaces import Interfaces
from .interfaces_fidelity import InterfacesFidelity
from .remote_sampling import RemoteSampling

STUDIES: dict[str, Study] = {s.name: s for s in (FdwOverhead(), RemoteSampling(), FileFdwTpch(), Interfaces(),
                                                 InterfacesFidelity())}
for _study in STUDIES.values():   # how each reads runs its older versions stored (results/ knows no study)
    upgrade.register(_study.name, _study.upgrade)


def get(name: str) -> Study:
    try:
        return STUDIES[name]
    except KeyError:
        raise UserError(f"STUDY: unknown study '{name}'; choose from {', '.join(STUDIES)}") from None
