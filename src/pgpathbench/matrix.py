"""Dimensions -> cases: the cross product, the study's exclusions, stable ids, round order.

A dimension is one axis of a study with a closed list of values (or a parser for open ones
such as a client count). A case is one point of the product; its id joins its values in the
dimensions' declared order (`ro:fdw_local:1`), so it is the same in every run.

Knob families are open-ended knob dimensions the user names on the command line
(`--fdw-option fetch_size=1,100` -> the dimension `fdw.fetch_size`): a study declares the family
(its option, its known names and their parsers), the chosen ones are keys of options.dims like
any other dimension, and `cross()` appends them after the declared dimensions, by name, so the
ids of runs without them do not change.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

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
    # The value every run stored before this dimension existed had (a hop's `direct`, TLS `off`):
    # cases with it leave the dimension out of their id, so those runs keep pairing with new ones.
    quiet: str | None = None

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
    quiet: frozenset[str] = frozenset()              # dimensions at their quiet value: not in the id

    @property
    def case_id(self) -> str:
        return ":".join(v for n, v in self.dims if n not in self.quiet)

    def __getitem__(self, name: str) -> str:
        return dict(self.dims)[name]

    def get(self, name: str, default: str | None = None) -> str | None:
        return dict(self.dims).get(name, default)

    def knobs(self, family: "KnobFamily") -> dict[str, str]:
        """The case's values of a knob family's dimensions, by knob name (`fetch_size`), those
        that apply (not NOT_APPLICABLE)."""
        return {family.knob_name(n): v for n, v in self.dims
                if family.owns(n) and v != NOT_APPLICABLE}

    def as_dict(self) -> dict[str, str]:
        return dict(self.dims)


def cross(study: str, dimensions: Mapping[str, Dimension], chosen: Mapping[str, Sequence[str]],
          exclude: Callable[[dict[str, str]], bool] | None = None) -> list[Case]:
    """Every combination of the chosen values, minus the excluded ones.

    Dimensions are taken in the study's declared order, whatever the order of `chosen` (a
    jsonb round trip reorders keys): case ids must not change when a run is resumed. A declared
    dimension missing from `chosen` (stored by a version that did not have it) is left out; the
    dimensions of knob families (not declared) follow the declared ones, by name.
    """
    names = [n for n in dimensions if n in chosen] + sorted(n for n in chosen if n not in dimensions)
    cases = []
    for combo in itertools.product(*(chosen[n] for n in names)):
        dims = tuple(zip(names, combo))
        if exclude is None or not exclude(dict(dims)):
            quiet = frozenset(n for n, v in dims if n in dimensions and v == dimensions[n].quiet)
            cases.append(Case(study, dims, quiet))
    return cases


NOT_APPLICABLE = "-"   # a knob dimension's value in the cases it does not apply to


def not_applicable(cases: Iterable[Case], names: Callable[[str], bool], applies: Callable[[Case], bool]) -> list[Case]:
    """The cases where the dimensions `names` accepts have no effect (`applies` false) carry
    NOT_APPLICABLE for them, and are kept once: a local table has no fetch_size to vary."""
    out: dict[Case, None] = {}
    for case in cases:
        if not applies(case):
            case = Case(case.study, tuple((n, NOT_APPLICABLE if names(n) else v) for n, v in case.dims), case.quiet)
        out.setdefault(case)
    return list(out)


@dataclass(frozen=True)
class KnobFamily:
    """An open-ended family of knob dimensions: `--OPTION NAME=V1,V2` (repeatable) makes the
    dimension PREFIX.NAME. Names are checked against `knobs` (name -> parser of one value,
    ValueError with the reason) before anything is written."""
    prefix: str                                      # "fdw": dimensions fdw.fetch_size, ...
    option: str                                      # "--fdw-option"
    help: str
    knobs: Mapping[str, Callable[[str], str]]
    # Open names (any server setting): name -> the parser of its values, ValueError when the name
    # is not even well-formed; the study's check() looks the name up (servers/guc.py).
    any_name: Callable[[str], Callable[[str], str]] | None = None
    example: str = ""                                # a name for messages, when `knobs` is empty

    @property
    def names_help(self) -> str:
        return "NAME: any server setting (SHOW ALL)" if self.any_name else f"NAME from {','.join(self.knobs)}"

    def parser(self, knob: str) -> Callable[[str], str]:
        if knob in self.knobs:
            return self.knobs[knob]
        if self.any_name is None:
            raise ValueError(f"unknown option '{knob}'; choose from {','.join(self.knobs)}")
        return self.any_name(knob)

    def dimension_name(self, knob: str) -> str:
        return f"{self.prefix}.{knob}"

    def owns(self, dimension: str) -> bool:
        return dimension.startswith(self.prefix + ".")

    def knob_name(self, dimension: str) -> str:
        return dimension.removeprefix(self.prefix + ".")

    def dimension(self, knob: str) -> Dimension:
        return Dimension(self.dimension_name(knob), f"{self.option} {knob}", parse=self.parser(knob), knob=True)

    def parse(self, given: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """['fetch_size=1,100', ...] -> {'fdw.fetch_size': ('1', '100')}; UserError naming the option."""
        out: dict[str, tuple[str, ...]] = {}
        for raw in given:
            name, sep, values = raw.partition("=")
            name = name.strip().lower() if self.any_name else name.strip()
            if not sep or not name:
                raise UserError(f"{self.option}: '{raw}' is not NAME=V1,V2; write e.g. "
                                f"{self.option} {self.example or next(iter(self.knobs))}=...")
            try:
                self.parser(name)
            except ValueError as e:
                raise UserError(f"{self.option}: {e}") from None
            dim = self.dimension_name(name)
            if dim in out:
                raise UserError(f"{self.option}: '{name}' given twice; give its values once: {name}=V1,V2")
            out[dim] = self.dimension(name).validate(values, f"{self.option} {name}")
        return out


def knob_dimensions(declared: Mapping[str, Dimension], names: Iterable[str]) -> list[str]:
    """Of a cases' dimension names, the knobs: declared ones marked knob, and the open-ended ones a
    KnobFamily made (a study does not declare them: fdw.fetch_size, set.work_mem)."""
    return [n for n in dict.fromkeys(names) if n not in declared or declared[n].knob]


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
    parse: Callable[[str], object]          # repeatable: called with the list of every value given
    default: object = None
    # A setting deciding a path's cost, the same for every case: compare accepts runs that differ
    # in it (it names it, but it is no environment difference).
    knob: bool = False
    repeatable: bool = False                 # the option may be given several times (--script A --script B)


@dataclass(frozen=True)
class Preset:
    name: str
    help: str
    repeat: int
    params: Mapping[str, object] = field(default_factory=dict)
    dims: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyOptions:
    """Validated, frozen options of one study in one run (stored with the run, for resume)."""
    study: str
    preset: str
    repeat: int
    params: Mapping[str, Any]
    dims: Mapping[str, tuple[str, ...]]

    def to_json(self) -> dict:
        return {"study": self.study, "preset": self.preset, "repeat": self.repeat,
                "params": dict(self.params), "dims": {k: list(v) for k, v in self.dims.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "StudyOptions":
        return cls(d["study"], d["preset"], d["repeat"], d["params"],
                   {k: tuple(v) for k, v in d["dims"].items()})
