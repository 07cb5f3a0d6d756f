"""The v1 event types, without Spark: the name server's own code may import this module.

:mod:`schemas.events` re-exports both tuples with every key's definition.
"""

EVENT_TYPES = (
    "ns_start",
    "ns_stop",
    "register",
    "heartbeat",
    "unregister",
    "expire",
    "channel_close",
    "wipe_write_perm",
    "add_write_perm",
    "delete_topic",
    "rejected",
    # written by ``nsaudit collect``: what another name server answered (docs/event-log.md, Observations)
    "observe_start",
    "observe_stop",
    "observe_error",
    "observe_snapshot",
    "observed_broker",
    "observed_route",
    # written by ``nsaudit collect`` when a live incident opens or closes (docs/event-log.md, Live incidents)
    "live_incident",
)

# Observation streams (``nsaudit collect``) record what a name server answered, not requests a
# server applied, and what the collector judged of it live: they change no route table of the
# stream's own.
OBSERVATION_TYPES = (
    "observe_start",
    "observe_stop",
    "observe_error",
    "observe_snapshot",
    "observed_broker",
    "observed_route",
    "live_incident",
)
