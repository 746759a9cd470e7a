"""When this agent may act on its cluster: while the service's lease on the backend is surely
still its own (self-fencing).

The service renews the lease when a request of the leader arrives; the agent counts from when
it sent the last request that was answered, which is never later, and stops acting
``RENEW_FRACTION`` of the lease after it (8 s of 12 s; kube-scheduler: 10 s of 15 s), so an agent
cut off from the service stops creating before any other agent can take the lease — even
when its API server is still there and it still holds work. It acts again only once a
request is answered again (a register after a lost lease).
"""

from __future__ import annotations

import threading
import time

DEFAULT_LEASE_SECONDS = 12.0  # until the service says (at the register)
RENEW_FRACTION = 2 / 3
RETRY_SECONDS = 2.0  # a standby's register again (kube-scheduler's retry period)


class Lease:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.lease_seconds = DEFAULT_LEASE_SECONDS
        self._renewed = float("-inf")  # monotonic: when the last answered request was sent
        self._lost = float("-inf")  # monotonic: answers to requests sent before it count not

    @property
    def renew_deadline(self) -> float:
        return self.lease_seconds * RENEW_FRACTION

    def configure(self, lease_seconds: float) -> None:
        with self._lock:
            self.lease_seconds = float(lease_seconds)

    def renewed(self, sent_at: float) -> None:
        """The service answered a request sent at ``sent_at`` (monotonic)."""
        with self._lock:
            if sent_at > self._lost:
                self._renewed = max(self._renewed, sent_at)

    def lost(self) -> None:
        """The service says another agent leads, or this one's lease ended."""
        with self._lock:
            self._lost = time.monotonic()
            self._renewed = float("-inf")

    def held(self) -> bool:
        with self._lock:
            return time.monotonic() < self._renewed + self.renew_deadline

    def ended_ago(self) -> float:
        with self._lock:
            return time.monotonic() - (self._renewed + self.renew_deadline)
