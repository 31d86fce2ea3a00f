"""Monthly GPU budgets per namespace: the namespace annotation, overridden by the chart's values.

A budget is a decimal amount in the pricing currency (``gpu.platform/monthly-budget: "1500"`` or
``"1500.50"``). A value that is not a positive finite decimal is ignored for that namespace and
counted and logged once per (namespace, value): a typo in one team's annotation must never stop the
books, nor flood the log every tick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from exporter.logs import get_logger
from exporter.model.budget_values import parse_budget

BUDGET_ANNOTATION = "gpu.platform/monthly-budget"
MAX_ANNOTATION_CHARS = 64  # what the API cache keeps of the annotation's value
MAX_REPORTED = 10_000  # (namespace, bad value) pairs remembered so each is logged once

log = get_logger("aggregator.budgets")


@dataclass(slots=True)
class BudgetAnnotations:
    """Namespaces' budget annotations as written (first 64 characters), fed by the namespace watch."""

    by_namespace: dict[str, str] = field(default_factory=dict)

    def handle(self, kind: str, etype: str, *, obj: Mapping[str, Any]) -> None:
        """A watch event or (``LISTED``) a full list; other kinds are not ours."""
        if kind != "namespaces":
            return
        if etype == "LISTED":
            self.by_namespace.clear()
            for item in obj.get("items") or []:
                self.handle(kind, "ADDED", obj=item)
            return
        meta = obj.get("metadata") or {}
        name, raw = meta.get("name", ""), (meta.get("annotations") or {}).get(BUDGET_ANNOTATION)
        if etype == "DELETED" or not isinstance(raw, str):
            self.by_namespace.pop(name, None)
        else:
            self.by_namespace[name] = raw[:MAX_ANNOTATION_CHARS]


@dataclass(frozen=True, slots=True)
class Budget:
    """One namespace's monthly budget and where it came from (``annotation`` or ``values``)."""

    namespace: str
    amount: float
    source: str


@dataclass(slots=True)
class BudgetSource:
    """Budgets from annotations (raw values from the API cache) with the configured overrides on top."""

    overrides: Mapping[str, float] = field(default_factory=dict)
    invalid_total: int = 0  # distinct (namespace, value) annotations refused since start
    _reported: set[tuple[str, str]] = field(default_factory=set)

    def current(self, annotations: Mapping[str, str]) -> dict[str, Budget]:
        """Every namespace's budget now; an override wins over the namespace's own annotation."""
        out: dict[str, Budget] = {}
        for ns, raw in annotations.items():
            amount = parse_budget(raw)
            if amount is None:
                self._refuse(ns, raw)
            else:
                out[ns] = Budget(ns, amount, "annotation")
        for ns, amount in self.overrides.items():
            out[ns] = Budget(ns, amount, "values")
        return out

    def _refuse(self, ns: str, raw: str) -> None:
        if (ns, raw) in self._reported or len(self._reported) >= MAX_REPORTED:
            return
        self.invalid_total += 1
        self._reported.add((ns, raw))
        log.warning("budget_annotation_invalid", namespace=ns, annotation=BUDGET_ANNOTATION, value=raw[:64],
                    reason="not a positive decimal amount in the pricing currency; the namespace has no budget")


class BudgetFileError(ValueError):
    """A budgets file or flag that is not a mapping of namespace to positive amount (one line, names the field)."""


def load_budgets(*, path: Path | None, pairs: list[str]) -> dict[str, float]:
    """Budgets for ``report --budgets``: a YAML/JSON file shaped like the chart's ``budgets:`` values, then
    ``NS=AMOUNT`` flags on top."""
    out: dict[str, float] = {}
    if path is not None:
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise BudgetFileError(f"{path}: cannot read: {str(exc).splitlines()[0]}") from None
        if isinstance(raw, dict) and isinstance(raw.get("budgets"), dict):
            raw = raw["budgets"]  # a values file of the chart
        if not isinstance(raw, dict):
            raise BudgetFileError(f"{path}: expected a mapping of namespace to monthly amount")
        for ns, value in raw.items():
            out[str(ns)] = _amount(value, f"{path}: {ns}")
    for pair in pairs:
        ns, sep, value = pair.partition("=")
        if not sep or not ns.strip():
            raise BudgetFileError(f"--budget {pair!r}: expected NAMESPACE=AMOUNT")
        out[ns.strip()] = _amount(value, f"--budget {ns.strip()}")
    return out


def _amount(value: object, where: str) -> float:
    amount = parse_budget(value)
    if amount is None:
        raise BudgetFileError(f"{where}: {value!r} is not a positive amount")
    return amount
