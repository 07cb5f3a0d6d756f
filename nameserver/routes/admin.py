"""The admin requests' writes to the route tables: WIPE_WRITE_PERM_OF_BROKER (205),
ADD_WRITE_PERM_OF_BROKER (327) and DELETE_TOPIC_IN_NAMESRV (216) (docs/nameserver-semantics.md
§2.8-§2.9).

:class:`RouteAdmin` adds them to :class:`nameserver.routes.lookups.RouteAnswers`;
:class:`nameserver.routes.manager.RouteInfoManager` is built on it; import from :mod:`nameserver.routes.manager`.
"""

from __future__ import annotations

from collections.abc import Callable

from nameserver.events import add_write_perm_event, delete_topic_event, wipe_write_perm_event
from nameserver.model import PERM_WRITE, QueueData
from nameserver.routes.events import Event, RequestContext
from nameserver.routes.lookups import RouteAnswers


class RouteAdmin(RouteAnswers):
    """The admin requests' operations; pure like the rest (``now`` is an argument), each returning
    the events it caused."""

    def wipe_write_perm_of_broker(self, broker_name: str, now: int, ctx: RequestContext) -> tuple[int, list[Event]]:
        """WIPE_WRITE_PERM_OF_BROKER (205): ``perm &= ~PERM_WRITE`` on every QueueData of the name."""
        return self._change_perm(broker_name, now, ctx, wipe_write_perm_event, lambda p: p & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str, now: int, ctx: RequestContext) -> tuple[int, list[Event]]:
        """ADD_WRITE_PERM_OF_BROKER (327): ``perm = 6`` exactly (INHERIT and PRIORITY dropped)."""
        return self._change_perm(broker_name, now, ctx, add_write_perm_event, lambda p: 6)

    def _change_perm(
        self,
        broker_name: str,
        now: int,
        ctx: RequestContext,
        build_event: Callable[[int, RequestContext, str, int], Event],
        new_perm: Callable[[int], int],
    ) -> tuple[int, list[Event]]:
        count = 0
        for topic in sorted(self.topic_queue_table):
            queue_data = self.topic_queue_table[topic].get(broker_name)
            if queue_data is None:
                continue
            count += 1  # entries already in the target state count too (W10 step 3)
            perm = new_perm(queue_data.perm)
            if perm != queue_data.perm:
                self._put_queue(
                    topic,
                    QueueData(
                        broker_name,
                        queue_data.read_queue_nums,
                        queue_data.write_queue_nums,
                        perm,
                        queue_data.topic_sys_flag,
                    ),
                )
        return count, [build_event(now, ctx, broker_name, count)]

    def delete_topic(self, topic: str, cluster: str | None, now: int, ctx: RequestContext) -> list[Event]:
        """DELETE_TOPIC_IN_NAMESRV (216, §2.9): whole topic, or one cluster's broker names."""
        event = delete_topic_event(now, ctx, topic, cluster)
        queues = self.topic_queue_table.get(topic)
        if queues is not None:
            if not cluster:
                for name in sorted(queues):
                    self._del_queue(topic, name)
            else:
                for name in sorted(self.cluster_addr_table.get(cluster, set()) & queues.keys()):
                    self._del_queue(topic, name)
        return [event]
