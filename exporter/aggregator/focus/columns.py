"""The FOCUS Cost and Usage columns this product writes: names, types, the versions that have them.

One table drives the CSV header, the Parquet schema and the metadata file, so the three never disagree.
FOCUS columns come first, then the ``x_`` columns (FOCUS column_handling: custom columns last).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

#: Parquet's decimal128(38, 18): 20 integer digits, finer than any amount the ledger holds.
PARQUET_SCALE = 18


class ColumnType(Enum):
    """FOCUS data types (the metadata's ``DataType`` values)."""

    DECIMAL = "Decimal"
    STRING = "String"
    DATETIME = "Date/Time"
    JSON = "JSON"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the export."""

    name: str
    type: ColumnType
    since: str = "1.2"  # the first FOCUS version that has it; x_ columns are in every projection

    @property
    def custom(self) -> bool:
        """An ``x_`` column: this exporter's own, outside the FOCUS specification."""
        return self.name.startswith("x_")


D, S, T, J = ColumnType.DECIMAL, ColumnType.STRING, ColumnType.DATETIME, ColumnType.JSON
VERSIONS = ("1.2", "1.3")

FOCUS_COLUMNS: tuple[Column, ...] = (
    Column("AllocatedMethodDetails", J, "1.3"),
    Column("AllocatedMethodId", S, "1.3"),
    Column("AllocatedResourceId", S, "1.3"),
    Column("AllocatedResourceName", S, "1.3"),
    Column("AllocatedTags", J, "1.3"),
    Column("AvailabilityZone", S),
    Column("BilledCost", D),
    Column("BillingAccountId", S),
    Column("BillingAccountName", S),
    Column("BillingAccountType", S),
    Column("BillingCurrency", S),
    Column("BillingPeriodEnd", T),
    Column("BillingPeriodStart", T),
    Column("ChargeCategory", S),
    Column("ChargeClass", S),
    Column("ChargeDescription", S),
    Column("ChargeFrequency", S),
    Column("ChargePeriodEnd", T),
    Column("ChargePeriodStart", T),
    Column("CommitmentDiscountCategory", S),
    Column("CommitmentDiscountId", S),
    Column("CommitmentDiscountName", S),
    Column("CommitmentDiscountQuantity", D),
    Column("CommitmentDiscountStatus", S),
    Column("CommitmentDiscountType", S),
    Column("CommitmentDiscountUnit", S),
    Column("ConsumedQuantity", D),
    Column("ConsumedUnit", S),
    Column("ContractedCost", D),
    Column("ContractedUnitPrice", D),
    Column("EffectiveCost", D),
    Column("HostProviderName", S, "1.3"),
    Column("InvoiceId", S),
    Column("InvoiceIssuerName", S),
    Column("ListCost", D),
    Column("ListUnitPrice", D),
    Column("PricingCategory", S),
    Column("PricingQuantity", D),
    Column("PricingUnit", S),
    Column("ProviderName", S),
    Column("PublisherName", S),
    Column("RegionId", S),
    Column("RegionName", S),
    Column("ResourceId", S),
    Column("ResourceName", S),
    Column("ResourceType", S),
    Column("ServiceCategory", S),
    Column("ServiceName", S),
    Column("ServiceProviderName", S, "1.3"),
    Column("ServiceSubcategory", S),
    Column("SkuId", S),
    Column("SkuMeter", S),
    Column("SkuPriceDetails", J),
    Column("SkuPriceId", S),
    Column("SubAccountId", S),
    Column("SubAccountName", S),
    Column("SubAccountType", S),
    Column("Tags", J),
)

CUSTOM_COLUMNS: tuple[Column, ...] = (
    Column("x_CapacityState", S),
    Column("x_Namespace", S),
    Column("x_Team", S),
    Column("x_WorkloadName", S),
    Column("x_PodName", S),
    Column("x_PriorityClass", S),
    Column("x_Queue", S),
    Column("x_NodePool", S),
    Column("x_GpuModel", S),
    Column("x_MigProfile", S),
    Column("x_Sharing", S),
    Column("x_AllocatedGpuSeconds", D),
    Column("x_UsedGpuSeconds", D),
    Column("x_IdleGpuSeconds", D),
    Column("x_UnmeasuredGpuSeconds", D),
    Column("x_UnallocatedGpuSeconds", D),
    Column("x_UnobservedGpuSeconds", D),
    Column("x_UnusedCommitmentGpuSeconds", D),
    Column("x_IdleCost", D),
    Column("x_EnergyJoules", D),
    Column("x_Co2eKg", D),
)


def columns_for(version: str) -> tuple[Column, ...]:
    """The columns of one FOCUS version's projection, in file order."""
    if version not in VERSIONS:
        raise ValueError(f"unknown FOCUS version {version!r}: use one of {', '.join(VERSIONS)}")
    return tuple(c for c in FOCUS_COLUMNS if c.since <= version) + CUSTOM_COLUMNS
