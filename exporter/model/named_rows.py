"""Database rows read by column name: a SELECT's columns are written once, as names, and every read of a
row goes through those names, never through a position counted by hand.

A ``Select`` renders its column list and resolves each name to its position once; reading a row is then
``operator.itemgetter`` at C speed (the FOCUS export reads millions of rows) or one dict per row where
speed does not matter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from operator import itemgetter
from typing import Any, TypeVar

R = TypeVar("R")
Row = Sequence[Any]

_CONVERT: dict[str, Callable[[Any], Any]] = {"str": str, "int": int, "float": float}


@dataclass(frozen=True, slots=True)
class Select:
    """The named columns of one SELECT, each with the SQL that computes it (its own name unless given)."""

    names: tuple[str, ...]
    exprs: tuple[str, ...]

    @classmethod
    def of(cls, names: Iterable[str], **exprs: str) -> Select:
        """Columns ``names`` in order; ``exprs`` gives the SQL of those that are not a plain column
        (``cost="SUM(cost)"``, ``list_cost="cost"`` on a ledger from before list prices)."""
        ordered = tuple(names)
        unknown = set(exprs) - set(ordered)
        if unknown or len(set(ordered)) != len(ordered):
            raise ValueError(f"bad SELECT columns {ordered} (expressions for {sorted(unknown)})")
        return cls(ordered, tuple(exprs.get(n, n) for n in ordered))

    @classmethod
    def record(cls, record: type[Any], *, skip: Iterable[str] = (), **exprs: str) -> Select:
        """The columns of a dataclass ``record``'s fields (but ``skip``), in declaration order."""
        left_out = set(skip)
        return cls.of((f.name for f in fields(record) if f.name not in left_out), **exprs)

    def sql(self) -> str:
        """The SELECT list, in the column order of ``names``."""
        return ", ".join(self.exprs)

    def getter(self, *names: str) -> Callable[[Row], tuple[Any, ...]]:
        """Read ``names`` from a row as a tuple (positions resolved here, once)."""
        at = itemgetter(*(self.names.index(n) for n in names))
        return at if len(names) > 1 else (lambda row: (at(row),))

    def mapping(self, row: Row) -> dict[str, Any]:
        """One row as ``{column name: value}``."""
        return dict(zip(self.names, row, strict=True))

    def records(self, record: type[R], rows: Iterable[Row], **fixed: Any) -> list[R]:
        """Rows as ``record``s whose fields are these columns (and ``fixed``, the same in every row), each
        value converted to its field's type (``str``, ``int`` or ``float``: sums may come back as ``Decimal``)."""
        types = {f.name: str(f.type) for f in fields(record) if f.name not in fixed}  # type: ignore[arg-type]
        if tuple(types) != self.names:
            raise ValueError(f"{record.__name__} fields {tuple(types)} are not the columns {self.names}")
        names, convert = self.names, tuple(_CONVERT[types[n]] for n in self.names)
        return [record(**fixed, **{n: c(v) for n, c, v in zip(names, convert, r, strict=False)}) for r in rows]
