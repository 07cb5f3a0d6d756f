"""Prometheus metrics over HTTP for ``nsaudit collect`` and ``nsaudit nameserver`` (docs/collect.md,
"Metrics and alerts").

A pure core (:mod:`~nameserver.metrics.exposition`: metric families and the text exposition
format) and a thin asyncio shell (:mod:`~nameserver.metrics.endpoint`: the HTTP endpoint, GET of
one path only, with bounded cost per scrape).
"""
