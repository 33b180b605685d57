"""The baseline a study compares each case with, measured in the same round: declared once in
the study's vocabulary (`Vocabulary.baseline`), read by its report's ratios and by --until-ci.

A case's baseline ("twin") is the case whose `dimension` holds `value` and whose other dimensions
are the case's, except the `free` ones: those the baseline is measured at one value only,
whatever the case's (fdw-overhead's local crosses no link and has no postgres_fdw option, so an
FDW case over a 5 ms link with fetch_size=1000 is read against the one local case of its
workload, clients, major and protocol). Ratios are paired by round (stats.ratio_summary).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from ..stats import Summary, ratio_summary


@dataclass(frozen=True)
class Baseline:
    dimension: str                  # "target"
    value: str                      # "local"
    # Dimensions the baseline does not vary with the case: names, or a knob family's prefix
    # ending in '.' ("fdw." frees fdw.fetch_size, fdw.batch_size...).
    free: tuple[str, ...] = ()
    # The ratio the study quotes: case / baseline (a slowdown), or baseline / case when True
    # (fdw-overhead's overhead: local TPS over the FDW target's).
    inverse: bool = False

    @property
    def label(self) -> str:
        return f"{self.dimension}={self.value}"

    def is_baseline(self, dims: Mapping[str, str]) -> bool:
        return dims.get(self.dimension) == self.value

    def _key(self, dims: Mapping[str, str]) -> tuple:
        return tuple(sorted((k, v) for k, v in dims.items() if k != self.dimension and not self._free(k)))

    def _free(self, dim: str) -> bool:
        return any(dim == f or (f.endswith(".") and dim.startswith(f)) for f in self.free)

    def twins(self, cases: Iterable) -> dict[str, object]:
        """case_id -> its baseline case, for every case that has one among `cases` (objects with
        .case_id and .dims: the result model's cases, or the matrix's). ValueError when two
        baseline cases would serve one case: the declaration's `free` is wrong."""
        cases = list(cases)
        bases: dict[tuple, object] = {}
        for c in cases:
            if self.is_baseline(dict(c.dims)):
                key = self._key(dict(c.dims))
                if key in bases:
                    raise ValueError(f"baseline {self.label}: {bases[key].case_id} and {c.case_id} both match")
                bases[key] = c
        out = {}
        for c in cases:
            dims = dict(c.dims)
            base = None if self.is_baseline(dims) else bases.get(self._key(dims))
            if base is not None:
                out[c.case_id] = base
        return out

    def ratio(self, case, base, metric: str) -> Summary | None:
        """The quoted ratio of `metric`, paired by round: case / baseline (or its inverse)."""
        mine, theirs = case.values(metric), base.values(metric)
        return ratio_summary(theirs, mine) if self.inverse else ratio_summary(mine, theirs)

    def ratios(self, cases: Iterable, metric: str) -> dict[str, tuple[object, Summary]]:
        """case_id -> (its baseline case, the quoted ratio of `metric`), for every case whose
        baseline is among `cases` and measured in at least one round with it."""
        found = {}
        for case_id, (case, base) in self._pairs(cases).items():
            r = self.ratio(case, base, metric)
            if r is not None:
                found[case_id] = (base, r)
        return found

    def _pairs(self, cases: Iterable) -> dict[str, tuple[object, object]]:
        cases = list(cases)
        twins = self.twins(cases)
        return {c.case_id: (c, twins[c.case_id]) for c in cases if c.case_id in twins}

    def ratio_text(self, metric: str) -> str:
        """'tps of target=local / the case' or 'duration_ms of the case / storage=regular'."""
        return (f"{metric} of {self.label} / the case" if self.inverse
                else f"{metric} of the case / {self.label}")
