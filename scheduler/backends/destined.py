"""Which groups are a backend's to run: those the fleet chose for it (`WorkflowGroup.backend`),
and the unchosen ones of a pool it alone serves (no choice is made there). The embedded
cycle, the Kubernetes dispatcher and the agent's work queue take only these, so exactly one
backend takes each group."""

from __future__ import annotations

from django.db.models import Q

from pools.selectors import served_by_q


def destined_q(backend: str, *, pool_field: str = "workflow__pool") -> Q:
    alone = (Q(**{f"{pool_field}__parent__isnull": True, f"{pool_field}__backends": [backend]})
             | Q(**{f"{pool_field}__parent__isnull": False,
                    f"{pool_field}__parent__backends": [backend]}))
    return served_by_q(backend, pool_field=pool_field) & (
        Q(backend=backend) | (Q(backend__isnull=True) & alone))
