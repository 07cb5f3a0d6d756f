"""The fleet simulator behind ``nsaudit simulate``, split by subject: ``options`` (the validated
request and the fault catalogue), ``brokers`` (the brokers' own state: identity, connections,
payload cache), ``namesrv`` (one name server = ``RouteInfoManager`` + event-log writer),
``engine`` (the timed-action heap, broker traffic and the run loop), ``faults`` (fault arrivals
and their effects) and ``truth`` (the ground-truth file ``<events>/_truth/faults.jsonl``).
The entry points are in :mod:`nameserver.sim.run`.
"""
