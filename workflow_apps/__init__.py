"""Apps: saved, versioned workflow specs (OSMO's `osmo app ...`), submitted as any workflow."""
