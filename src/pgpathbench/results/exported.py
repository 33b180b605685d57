"""A run read back from its export (`pgpathbench export RUN --format json`, gzipped or not), so
that report, export and compare work on a run measured elsewhere without its results store: the
paper runs of docs/reproduction.md are committed this way (docs/runs/)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ..errors import UserError
from ..report.export import FORMAT_VERSION
from ..validate import EXPORT_SUFFIXES
from .model import RunResult


def names_file(ref: str) -> bool:
    """A RUN argument that names an export file rather than a stored run."""
    return ref.endswith(EXPORT_SUFFIXES)


def read(ref: str, option: str = "RUN") -> RunResult:
    """The result model of an exported run; one line naming `option` if the file is not one."""
    path = Path(ref)
    if not path.is_file():
        raise UserError(f"{option}: no file {ref}; give a file written by 'pgpathbench export RUN --format json', "
                        "or a stored run's id")
    try:
        raw = gzip.decompress(path.read_bytes()) if ref.endswith(".gz") else path.read_bytes()
        doc = json.loads(raw)
    except (OSError, EOFError, ValueError) as e:   # gzip's BadGzipFile and JSON's errors are ValueErrors
        raise UserError(f"{option}: {ref} is not a pgpathbench export ({type(e).__name__}); give a file written "
                        "by 'pgpathbench export RUN --format json'") from None
    version = doc.get("format_version") if isinstance(doc, dict) else None
    if not isinstance(version, int) or not isinstance(doc.get("run"), dict):
        raise UserError(f"{option}: {ref} is not a pgpathbench export (no format_version and run); give a file "
                        "written by 'pgpathbench export RUN --format json'")
    if version > FORMAT_VERSION:
        raise UserError(f"{option}: {ref} has export format_version {version}, this pgpathbench reads up to "
                        f"{FORMAT_VERSION}; upgrade pgpathbench")
    try:
        return RunResult.from_export(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{option}: {ref} is not a complete pgpathbench export ({type(e).__name__}: {e})") from None
