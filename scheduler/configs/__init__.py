"""OSMO's config history over the two configs kept here, POOL (the pools app's events) and
BACKEND (the backends' events): one list, diffs between revisions, and rollbacks. It lives in
the scheduler app, the lowest app that sees both."""
