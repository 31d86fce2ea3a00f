"""Text tables for a terminal: human headers, and no wider than 120 columns unless asked (``wide``).

A table that wraps in an 80-to-120-column terminal cannot be read; the columns a reader needs first are kept
(``keep``, then ``priority`` in order) while they fit, the others are named in one line below the table so
nobody wonders where they went. Numbers are right-aligned; the first column is left-aligned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 120
_NUMBER = re.compile(r"-?[0-9][0-9,]*(\.[0-9]+)?")
GAP = "  "

#: Headers a person reads: what the snake_case field names mean, with their unit.
HEADERS = {
    "cluster": "Cluster", "namespace": "Namespace", "pod": "Pod", "workload": "Workload", "node": "Node",
    "pool": "Pool", "gpu_model": "GPU model", "vendor": "Vendor", "priority_class": "Priority class",
    "claim": "Claim", "sharing": "Sharing", "commitment": "Commitment",
    "allocated_gpu_hours": "Allocated GPU-h", "used_gpu_hours": "Used GPU-h", "idle_gpu_hours": "Idle GPU-h",
    "unmeasured_gpu_hours": "Unmeasured GPU-h", "split_gpu_hours": "Split GPU-h", "cost": "Cost",
    "idle_cost": "Idle cost", "list_cost": "List cost", "currency": "Currency", "co2e_kg": "CO2e kg",
    "unmeasured_energy_gpu_hours": "No-energy GPU-h", "unallocated_gpu_hours": "Unallocated GPU-h",
    "unallocated_cost": "Unallocated cost", "unallocated_list_cost": "Unallocated list cost",
    "unobserved_gpu_hours": "Unobserved GPU-h", "unobserved_cost": "Unobserved cost",
    "unobserved_list_cost": "Unobserved list cost", "unallocated_co2e_kg": "Unallocated CO2e kg",
    "unobserved_co2e_kg": "Unobserved CO2e kg",
    "unallocated_unmeasured_energy_gpu_hours": "Unallocated no-energy GPU-h",
    "unobserved_unmeasured_energy_gpu_hours": "Unobserved no-energy GPU-h",
    "reprice_cost": "Repriced cost", "reprice_list_cost": "Repriced list cost",
    "month": "Month", "budget": "Budget", "spent": "Spent", "burn_per_hour": "Burn /h",
    "forecast_month_cost": "Month-end forecast", "over_budget": "Over budget",
    "budget_crossing_day": "Crosses budget on", "action": "Action", "current": "Now", "target": "Advised",
    "util_p95": "Util p95", "fb_peak_gib": "Memory peak GiB", "monthly_cost_now": "Monthly cost now",
    "monthly_cost_after": "Monthly cost after", "monthly_savings": "Monthly savings", "reason": "Reason",
}


def header(field: str) -> str:
    """The human header of ``field``: the table's name for it, else its words with GPU-hours as GPU-h."""
    if field in HEADERS:
        return HEADERS[field]
    words = field.replace("_gpu_hours", " GPU-h").replace("_", " ")
    return words[:1].upper() + words[1:]


@dataclass(frozen=True, slots=True)
class Table:
    """Rows of cells under named fields; ``keep`` are always shown, then ``priority`` while they fit."""

    fields: Sequence[str]
    cells: Sequence[Sequence[str]]
    keep: Sequence[str] = ()
    priority: Sequence[str] = ()

    def widths(self) -> dict[str, int]:
        """Each field's column width: its header or its widest cell."""
        return {f: max(len(header(f)), *(len(c[i]) for c in self.cells)) for i, f in enumerate(self.fields)}

    def shown(self, *, wide: bool, width: int = WIDTH) -> list[str]:
        """The fields shown, in their order: all when ``wide``, else ``keep`` then ``priority`` while they fit."""
        if wide:
            return list(self.fields)
        w = self.widths()
        chosen = [f for f in self.fields if f in self.keep]
        used = sum(w[f] for f in chosen) + len(GAP) * max(0, len(chosen) - 1)
        for f in [*self.priority, *(f for f in self.fields if f not in self.priority)]:
            if f in chosen or f not in w:
                continue
            if used + len(GAP) + w[f] <= width:
                chosen.append(f)
                used += len(GAP) + w[f]
        return [f for f in self.fields if f in chosen]

    def _numeric(self, i: int) -> bool:
        """A column of numbers (or nothing): right-aligned, so digits line up."""
        return all(_NUMBER.fullmatch(c[i]) or c[i] in ("", "unknown") for c in self.cells)

    def render(self, *, wide: bool = False, width: int = WIDTH) -> str:
        """The aligned table, and a line naming the fields left out (``--wide`` shows them)."""
        shown = self.shown(wide=wide, width=width)
        w = self.widths()
        index = {f: i for i, f in enumerate(self.fields)}

        numeric = {f for f in shown if self._numeric(index[f])}

        def line(values: Sequence[str]) -> str:
            return GAP.join(v.rjust(w[f]) if f in numeric else v.ljust(w[f])
                            for f, v in zip(shown, values, strict=True)).rstrip()

        lines = [line([header(f) for f in shown])]
        lines += [line([c[index[f]] for f in shown]) for c in self.cells]
        hidden = [f for f in self.fields if f not in shown]
        if hidden:
            more = f"{len(hidden)} more column{'s' if len(hidden) > 1 else ''}"
            lines.append(f"({more} with --wide; --format csv or json has every field)")
        return "\n".join(lines) + "\n"
