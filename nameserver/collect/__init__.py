"""``nsaudit collect``: observe real name servers over the remoting protocol (docs/collect.md).

A pure core (:mod:`~nameserver.collect.view`, :mod:`~nameserver.collect.record`,
:mod:`~nameserver.collect.targets`) decides what to log; a thin asyncio shell
(:mod:`~nameserver.collect.rounds`, :mod:`~nameserver.collect.poller`,
:mod:`~nameserver.collect.collector`, :mod:`~nameserver.collect.cli`) asks the servers and writes
one event stream per server through the event-log writer.
"""
