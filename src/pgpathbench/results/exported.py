"""A run read back from its export (`pgpathbench export RUN --format json`, gzipped or not), so
that report, export and compare work on a run measured elsewhere without its results store: the
paper runs of docs/reproduction.md are committed this way (docs/runs/)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

from .. import files
from ..errors import UserError
from ..validate import EXPORT_SUFFIXES
from .model import RunResult

# The export format this code writes (report/export.py says what each version holds) and reads up to.
FORMAT_VERSION = 3
MAX_EXPORT_BYTES = 64 << 20   # what an export may hold, uncompressed (a paper run's is 4 MB)


def names_file(ref: str) -> bool:
    """A RUN argument that names an export file rather than a stored run."""
    return ref.endswith(EXPORT_SUFFIXES)


def read(ref: str, option: str = "RUN") -> RunResult:
    """The result model of an exported run; one line naming `option` if the file is not one. The
    file is read by files.read_bounded's rule, and so is what it decompresses to."""
    fix = "give a file written by 'pgpathbench export RUN --format json'"
    if not Path(ref).exists():
        raise UserError(f"{option}: no file {ref}; {fix}, or a stored run's id")
    try:
        raw = files.read_bounded(ref, MAX_EXPORT_BYTES, "a run's export")
        if ref.endswith(".gz"):
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
                raw = gz.read(MAX_EXPORT_BYTES + 1)   # a small file may inflate to anything
            if len(raw) > MAX_EXPORT_BYTES:
                raise ValueError(f"{ref} decompresses to over {files.size_text(MAX_EXPORT_BYTES)}; {fix}")
    except ValueError as e:
        raise UserError(f"{option}: {e}") from None
    except (OSError, EOFError) as e:   # gzip's BadGzipFile is an OSError
        raise UserError(f"{option}: {ref} is not a pgpathbench export ({type(e).__name__}); {fix}") from None
    try:
        doc = json.loads(raw)
    except ValueError as e:   # JSON's errors, and bytes that are no text
        raise UserError(f"{option}: {ref} is not a pgpathbench export ({type(e).__name__}); {fix}") from None
    version = doc.get("format_version") if isinstance(doc, dict) else None
    if not isinstance(version, int) or not isinstance(doc.get("run"), dict):
        raise UserError(f"{option}: {ref} is not a pgpathbench export (no format_version and run); {fix}")
    if version > FORMAT_VERSION:
        raise UserError(f"{option}: {ref} has export format_version {version}, this pgpathbench reads up to "
                        f"{FORMAT_VERSION}; upgrade pgpathbench")
    try:
        return RunResult.from_export(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{option}: {ref} is not a complete pgpathbench export ({type(e).__name__}: {e})") from None
