"""Dimensions -> cases: the cross product, the study's exclusions, stable ids, round order.

A dimension is one axis of a study with a closed list of values (or a parser for open ones
such as a client count). A case is one point of the product; its id joins its values in the
dimensions' declared order (`ro:fdw_local:1`), so it is the same in every run.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from . import validate
from .errors import UserError


@dataclass(frozen=True)
class Dimension:
    name: str
    help: str
    values: tuple[str, ...] = ()                    # the closed list, when there is one
    parse: Callable[[str], str] | None = None        # for open dimensions: validate, normalise
    # A setting that decides a path's cost (fetch size, protocol, a server setting): reports plot
    # the primary metric against it, and compare accepts runs that differ only in knobs.
    knob: bool = False

    def validate(self, raw: str, option: str) -> tuple[str, ...]:
        """'a,b' -> ('a', 'b'), each checked against the dimension; UserError names the option."""
        items = [v.strip() for v in raw.split(",")]
        if not raw.strip() or any(not v for v in items):
            raise UserError(f"{option}: empty value in '{raw}'; give a comma-separated list")
        out: list[str] = []
        for v in items:
            if self.parse is not None:
                try:
                    v = self.parse(v)
                except ValueError as e:
                    raise UserError(f"{option}: {e}") from None
            elif v not in self.values:
                raise UserError(f"{option}: unknown value '{v}'; choose from {','.join(self.values)}")
            if v not in out:
                out.append(v)
        return tuple(out)


@dataclass(frozen=True)
class Case:
    study: str
    dims: tuple[tuple[str, str], ...]                # in the study's dimension order

    @property
    def case_id(self) -> str:
        return ":".join(v for _, v in self.dims)

    def __getitem__(self, name: str) -> str:
        return dict(self.dims)[name]

    def as_dict(self) -> dict[str, str]:
        return dict(self.dims)


def cross(study: str, dimensions: Mapping[str, Dimension], chosen: Mapping[str, Sequence[str]],
          exclude: Callable[[dict[str, str]], bool] | None = None) -> list[Case]:
    """Every combination of the chosen values, minus the excluded ones.

    Dimensions are taken in the study's declared order, whatever the order of `chosen` (a
    jsonb round trip reorders keys): case ids must not change when a run is resumed.
    """
    names = list(dimensions)
    cases = []
    for combo in itertools.product(*(chosen[n] for n in names)):
        dims = tuple(zip(names, combo))
        if exclude is None or not exclude(dict(dims)):
            cases.append(Case(study, dims))
    return cases


def round_order(cases: Iterable[Case], seed: int, round_no: int) -> list[Case]:
    """The shuffled order of one round: fixed by (seed, round), so a resumed run repeats it."""
    order = list(cases)
    random.Random(f"{seed}:{round_no}").shuffle(order)
    return order


def positive_int(what: str) -> Callable[[str], str]:
    def parse(v: str) -> str:
        number = validate.digits(v.removeprefix("-"))
        if not number or v.startswith("-") or int(v) <= 0:
            raise ValueError(f"'{v}' is not a positive whole number of {what}" if number
                             else f"'{v}' is not a whole number of {what} (digits 0-9)")
        return str(validate.whole(v, 1, None, what))
    return parse


@dataclass(frozen=True)
class Parameter:
    """A scalar option of a study (scale, duration): a parser and a help line."""
    name: str
    help: str
    parse: Callable[[str], object]      # repeatable: called with the list of every value given
    default: object = None
    repeatable: bool = False            # --query a=... --query b=...


@dataclass(frozen=True)
class Preset:
    name: str
    help: str
    repeat: int
    params: Mapping[str, object] = field(default_factory=dict)
    dims: Mapping[str, Sequence[str]] = field(default_factory=dict)
