"""What operators see: Prometheus metrics (``GET /metrics``), request ids and structured logs.

The plumbing lives here, in the lowest layer; each app defines and updates its own metrics and
registers its scrape-time collectors in ``AppConfig.ready`` (docs/OBSERVABILITY.md).
"""
