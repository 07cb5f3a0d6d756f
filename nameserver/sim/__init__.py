"""The fleet simulator behind ``nsaudit simulate``, split by subject.

* :mod:`~nameserver.sim.options`: the validated request and the fault catalogue.
* :mod:`~nameserver.sim.brokers`: the brokers' own state (identity, connections, payload cache).
* :mod:`~nameserver.sim.namesrv`: one name server = ``RouteInfoManager`` + event-log writer.
* :mod:`~nameserver.sim.engine`: the timed-action heap, broker traffic and the run loop.
* :mod:`~nameserver.sim.faults`: fault arrivals and their effects.
* :mod:`~nameserver.sim.truth`: the ground-truth file ``<events>/_truth/faults.jsonl``.

The entry points are in :mod:`nameserver.sim.run`.
"""
