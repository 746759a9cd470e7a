"""Users' credentials (registry logins, data keys, generic secrets), encrypted at rest and named
by the tasks that use them (docs/CREDENTIALS.md)."""
