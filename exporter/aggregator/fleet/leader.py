"""Leader election over a coordination.k8s.io/v1 Lease, as client-go does it.

Only the leader acknowledges agents (so they may forget gone pods' counters) and serves metrics and
/readyz; standbys keep pulling and booking into their own ledgers without acknowledging, so whichever
replica leads next has complete books. A leader that cannot renew within the lease duration steps down.

With one shared ledger (PostgreSQL), standbys book nothing; a new leader first takes the next fencing
term in the ledger and reloads the books, and every tick's transaction checks the term, so a deposed
leader that still believes it leads (a paused process, a partition) cannot book a second time.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from exporter import runtime
from exporter.logs import get_logger

if TYPE_CHECKING:
    from exporter.aggregator.ledger.store import Ledger, LedgerState

log = get_logger("leader")


async def take_over_ledger(ledger: Ledger, *, holder: str, leading: Callable[[], bool], lock: asyncio.Lock,
                           restore: Callable[[LedgerState], None], retry: float) -> None:
    """Take the next fencing term, then reload the books the previous leader committed; retried while
    this replica still leads and the database does not answer."""
    while leading():
        try:
            async with lock:
                try:  # the term is set on the ledger's thread: waited for, so a cancel cannot leave it set after this
                    term = await runtime.finish(asyncio.ensure_future(ledger.acquire_term(holder)))
                    restore(await ledger.load_state())
                except BaseException:  # a term without the books it covers: a tick would book on stale marks
                    ledger.term = None
                    raise
            log.info("ledger_term_acquired", term=term, cluster=ledger.cluster, identity=holder)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database's fault
            log.warning("ledger_take_over_failed", error=repr(exc)[:200])
            await asyncio.sleep(retry)


class LeaderElector:
    """Holds (or waits for) one Lease; ``is_leader`` and ``on_change`` tell the daemon when leadership moves."""

    def __init__(self, api_client: Any, namespace: str, *, name: str, lease_duration: float, renew_period: float,
                 identity: str | None = None, on_change: Callable[[bool], None] | None = None) -> None:
        from kubernetes_asyncio import client

        self.api = client.CoordinationV1Api(api_client)
        self.namespace, self.name = namespace, name
        self.lease_duration = lease_duration
        self.renew_period = renew_period
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.on_change = on_change
        self.is_leader = False
        self._last_renew = 0.0
        self.transitions = 0

    def _set(self, leader: bool) -> None:
        if leader != self.is_leader:
            self.is_leader = leader
            self.transitions += 1
            log.info("leadership_changed", leader=leader, identity=self.identity, lease=f"{self.namespace}/{self.name}")
            if self.on_change is not None:
                self.on_change(leader)

    async def run(self) -> None:
        """Renew or try to take the lease every ``renew_period`` until cancelled; step down once renewals fail for a
        lease duration."""
        loop = asyncio.get_running_loop()
        while True:
            try:  # ``asyncio.timeout``, not ``wait_for``: on 3.11 that returns an attempt's result (or error) when the
                # cancel arrives as the attempt ends, and this loop would run on, never letting the daemon stop
                async with asyncio.timeout(self.renew_period * 2):
                    acquired = await self.try_acquire_or_renew()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API server's fault: keep trying
                log.warning("lease_error", error=repr(exc)[:200])
                acquired = False
            now = loop.time()
            if acquired:
                self._last_renew = now
                self._set(True)
            elif not self.is_leader or now - self._last_renew > self.lease_duration:
                self._set(False)
            await asyncio.sleep(self.renew_period)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to create, take over (expired) or renew the lease; False when another holder's lease is live."""
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        now = datetime.now(UTC)
        spec = client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=int(self.lease_duration),
                                  acquire_time=now, renew_time=now, lease_transitions=0)
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=spec)
            try:
                await self.api.create_namespaced_lease(self.namespace, body)
            except ApiException as exc2:
                if exc2.status == 409:
                    return False
                raise
            return True
        held_by = lease.spec.holder_identity if lease.spec else None
        renewed = lease.spec.renew_time if lease.spec else None
        duration = (lease.spec.lease_duration_seconds if lease.spec else None) or self.lease_duration
        if held_by != self.identity and renewed is not None and \
                (now - renewed).total_seconds() < duration:
            return False  # someone else holds a live lease
        if held_by == self.identity and lease.spec and lease.spec.acquire_time:
            spec.acquire_time = lease.spec.acquire_time
            spec.lease_transitions = lease.spec.lease_transitions
        else:
            spec.lease_transitions = ((lease.spec.lease_transitions or 0) + 1) if lease.spec else 1
        lease.spec = spec
        try:
            await self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True
