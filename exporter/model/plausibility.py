"""Whether an agent's counters could be true: the checks that keep a broken or hostile agent out of the books.

Pure arithmetic over one snapshot's deltas; booking refuses the whole snapshot (for that node only) when
any check fails, and keeps its marks, so the next sane snapshot's delta loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.model.books import SPLIT_UNKNOWN, CounterMark

#: Headroom of the rate bound: clocks and tick jitter, never a whole extra GPU-hour.
RATE_SLACK_RELATIVE = 1e-3
RATE_SLACK_SECONDS = 1.0
#: Holders pay what Kubernetes allocated them, so an oversubscribed device (which the agent counts) can
#: take a node's sum above its capacity; never beyond twice it.
OVERSUBSCRIPTION_LIMIT = 2.0
#: Highest believable board power per GPU (watts). The largest data-centre GPUs are rated about 1.4 kW
#: (GB300 class); 2 kW leaves a wide margin for transients and tick jitter, and still refuses an energy
#: counter read a thousand times too large (mJ taken as J). The agent drops a GPU's delta above it (that
#: interval is then unmeasured); booking refuses a snapshot whose energy exceeds it over the node's GPUs.
MAX_GPU_WATTS = 2000.0
EPS = 1e-6


def counter_advance(prev: CounterMark | None, cur: CounterMark) -> CounterMark | None:
    """What a counter advanced since its mark; None when it went backwards (impossible within an epoch).

    A mark whose split is ``SPLIT_UNKNOWN`` (booked before split seconds were) advances no split: the agent's
    cumulative split covers its whole epoch, not this interval, and becomes the next mark."""
    if prev is None:
        return cur
    split_known = prev.split_s != SPLIT_UNKNOWN
    if (cur.allocated_s < prev.allocated_s - EPS or cur.used_s < prev.used_s - EPS
            or cur.unmeasured_s < prev.unmeasured_s - EPS or cur.energy_j < prev.energy_j - EPS
            or (split_known and cur.split_s < prev.split_s - EPS)):
        return None
    return CounterMark(allocated_s=max(0.0, cur.allocated_s - prev.allocated_s),
                       used_s=max(0.0, cur.used_s - prev.used_s),
                       unmeasured_s=max(0.0, cur.unmeasured_s - prev.unmeasured_s),
                       energy_j=max(0.0, cur.energy_j - prev.energy_j),
                       split_s=max(0.0, cur.split_s - prev.split_s) if split_known else 0.0)



def counter_position(prev: CounterMark | None, cur: CounterMark) -> CounterMark:
    """The mark after ``cur`` was booked against ``prev``: each field the larger of the two. A counter back by less
    than the tolerance advanced nothing (``counter_advance``), so its mark stays where it was; following it back
    would book that sliver again at the next advance."""
    if prev is None or (cur.allocated_s >= prev.allocated_s and cur.used_s >= prev.used_s
                        and cur.unmeasured_s >= prev.unmeasured_s and cur.energy_j >= prev.energy_j
                        and cur.split_s >= prev.split_s):
        return cur
    return CounterMark(allocated_s=max(prev.allocated_s, cur.allocated_s), used_s=max(prev.used_s, cur.used_s),
                       unmeasured_s=max(prev.unmeasured_s, cur.unmeasured_s),
                       energy_j=max(prev.energy_j, cur.energy_j), split_s=max(prev.split_s, cur.split_s))


def implausible(deltas: Iterable[CounterMark], *, wall: float | None, gpus: int,
                unmeasured_energy_s: float = 0.0) -> str:
    """Why these deltas over ``wall`` seconds on a node of ``gpus`` GPUs cannot be true, or "".

    No counter may advance faster than GPUs x wall time (nor the GPU-seconds whose energy was not
    measured); all together not faster than twice that; used or unmeasured never above allocated, nor split; the
    energy of all of them together not above ``MAX_GPU_WATTS`` x GPUs x wall time. Without the wall time
    (an agent that does not say when its epoch began) or the GPU count (no inventory, no GPU-count
    label) only the per-counter checks apply."""
    deltas = list(deltas)
    for d in deltas:
        if d.used_s > d.allocated_s + EPS or d.unmeasured_s > d.allocated_s + EPS:
            return "used_above_allocated"
        if d.split_s > d.allocated_s + EPS:
            return "split_above_allocated"
    if wall is None:
        return ""
    if wall < -EPS:
        return "time_went_backwards"
    if not gpus:
        return ""
    bound = gpus * (max(0.0, wall) * (1 + RATE_SLACK_RELATIVE) + RATE_SLACK_SECONDS)
    if any(d.allocated_s > bound for d in deltas):
        return "faster_than_wall_time"
    if sum(d.allocated_s for d in deltas) > OVERSUBSCRIPTION_LIMIT * bound or unmeasured_energy_s > bound:
        return "faster_than_wall_time"
    if sum(d.energy_j for d in deltas) > MAX_GPU_WATTS * bound:
        return "energy_above_power_envelope"
    return ""
