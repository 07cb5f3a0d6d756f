"""The read side of the route tables: what the lookup requests answer (docs/nameserver-semantics.md
§2.10-§2.11).

:class:`RouteAnswers` adds the reads to :class:`nameserver.routes.tables.RouteTables`; they
change nothing and return detached values (copies sorted as RocketMQ 4.9 answers, A3).
:class:`nameserver.routes.manager.RouteInfoManager` is built on it; import from :mod:`nameserver.routes.manager`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nameserver.model import FLAG_UNIT, FLAG_UNIT_SUB, QueueData
from nameserver.routes.tables import BrokerData, RouteTables


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC's answer; lists sorted by broker name (A3)."""

    broker_datas: list[BrokerData]
    queue_datas: list[QueueData]
    filter_server_table: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO's answer: the tables as they are, dangling names included."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]


# Request code -> (flags the topic's first QueueData must have, flags it must lack), for 311/312/313.
UNIT_FLAGS = {311: (FLAG_UNIT, 0), 312: (FLAG_UNIT_SUB, 0), 313: (FLAG_UNIT_SUB, FLAG_UNIT)}


class RouteAnswers(RouteTables):
    """GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO and the topic lists, over the tables."""

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC (105, §2.10): ``None`` means TOPIC_NOT_EXIST."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        names = sorted(queues)
        broker_datas = [self.broker_addr_table[n].copy() for n in names if n in self.broker_addr_table]
        if not broker_datas:
            return None
        filter_table = {}
        for broker_data in broker_datas:
            for addr in broker_data.broker_addrs.values():
                servers = self.filter_server_table.get(addr)
                if servers:
                    filter_table[addr] = list(servers)
        return TopicRouteData(broker_datas, [queues[n] for n in names], dict(sorted(filter_table.items())))

    def get_all_cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106, §2.11)."""
        return ClusterInfo(
            {n: self.broker_addr_table[n].copy() for n in sorted(self.broker_addr_table)},
            {c: sorted(self.cluster_addr_table[c]) for c in sorted(self.cluster_addr_table)},
        )

    def get_all_topic_list(self) -> list[str]:
        """206: every topic, sorted."""
        return sorted(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        """224: topics with QueueData of any broker name in the cluster's set."""
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, queues in self.topic_queue_table.items() if names & queues.keys())

    def get_system_topic_list(self) -> tuple[list[str], str | None]:
        """304: cluster names and broker names of every cluster set, plus one broker address."""
        items: set[str] = set()
        for cluster, names in self.cluster_addr_table.items():
            items.add(cluster)
            items.update(names)
        broker_addr = None
        if self.broker_addr_table:
            first = self.broker_addr_table[min(self.broker_addr_table)]
            if first.broker_addrs:
                broker_addr = first.broker_addrs[min(first.broker_addrs)]
        return sorted(items), broker_addr

    def get_unit_topics(self, with_flag: int, without_flag: int = 0) -> list[str]:
        """311/312/313: topics whose first QueueData (lowest broker name) has/lacks flags."""
        result = []
        for topic, queues in self.topic_queue_table.items():
            flag = queues[min(queues)].topic_sys_flag
            if flag & with_flag == with_flag and not (without_flag and flag & without_flag == without_flag):
                result.append(topic)
        return sorted(result)
