"""Topic and admin faults.

* ``topic_change``: a topic is created on 1-3 groups of a cluster, or an existing topic's queue
  numbers change on one group (sometimes only the write queues, the scale-out mistake); the
  master takes the next data version and sends an incremental registration at once.
* ``wipe``: mqadmin wipes a group's write perm on one server (205); half the time it adds it
  back 5-60 min later (327).
* ``delete_topic``: mqadmin deletes a topic on its brokers (their data versions move on) and
  then on every server (216), half the time for one cluster only.
"""

from __future__ import annotations

import dataclasses
import random

from nameserver.model import TopicConfig
from nameserver.sim.brokers import SimGroup
from nameserver.sim.faults.core import FOREVER, MINUTE_MS, QUEUE_CHOICES, SETTLE_MS, FaultCore
from nameserver.sim.namesrv import SimServer
from nameserver.sim.truth import Record, new_record, note_effect


class TopicFaults(FaultCore):
    """The faults that change topics or write perms, as a broker or mqadmin would."""

    def _topic_change(self, now: int, rng: random.Random) -> Record | None:
        groups = [g for g in self.sim.groups if g.idle(now) and g.master() is not None]
        if not groups:
            return None
        first = rng.choice(groups)
        if rng.random() < 0.5 or not first.topics:
            topic = f"topic-{self._next_topic:0{self._topic_width}d}"
            self._next_topic += 1
            peers = [g for g in groups if g.cluster == first.cluster and g is not first]
            chosen = [first] + rng.sample(peers, min(len(peers), rng.randint(0, 2)))
            queues = rng.choice(QUEUE_CHOICES[:3])
            config = TopicConfig(topic, queues, queues)
            action = "create"
        else:
            chosen = [first]
            topic = rng.choice(sorted(first.topics))
            old = first.topics[topic]
            if rng.random() < 0.3:  # scale the writers out first: read < write for a while
                config = dataclasses.replace(old, write_queue_nums=old.write_queue_nums * 2)
            else:
                queues = rng.choice([q for q in QUEUE_CHOICES if q != old.write_queue_nums])
                config = dataclasses.replace(old, read_queue_nums=queues, write_queue_nums=queues)
            action = "queues"
        chosen.sort(key=lambda g: g.broker_name)
        record = new_record(
            "topic_change",
            topic,
            now,
            action=action,
            broker_names=[g.broker_name for g in chosen],
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            data_versions={},
        )
        record["end_ms"] = now
        for group in chosen:
            topics = dict(group.topics)
            topics[topic] = config
            record["data_versions"][group.broker_name] = group.set_topics(topics, now)
            group.busy_until = now + SETTLE_MS
            master = group.master()
            assert master is not None
            self.sim.send(now, master, master.incremental_payload((config,)), record)
        self._end_read_lt_write(now, topic)
        return record

    def _delete_topic(self, now: int, rng: random.Random) -> Record | None:
        holders: dict[str, list[SimGroup]] = {}
        for group in self.sim.groups:
            for topic in group.topics:
                holders.setdefault(topic, []).append(group)
        candidates = sorted(t for t, gs in holders.items() if all(g.idle(now) and g.master() for g in gs))
        if not candidates:
            return None
        topic = rng.choice(candidates)
        groups = holders[topic]
        cluster = rng.choice(sorted({g.cluster for g in groups})) if rng.random() < 0.5 else None
        affected = [g for g in groups if cluster is None or g.cluster == cluster]
        record = new_record(
            "delete_topic",
            topic,
            now,
            cluster=cluster,
            broker_names=[g.broker_name for g in affected],
            data_versions={},
        )
        record["end_ms"] = now
        # mqadmin deleteTopic: first the brokers (DELETE_TOPIC_IN_BROKER: the topic goes and the
        # data version moves on, no registration is sent), then every name server (216)
        for group in affected:
            topics = dict(group.topics)
            del topics[topic]
            record["data_versions"][group.broker_name] = group.set_topics(topics, now)
            group.busy_until = now + SETTLE_MS
        for server in self.sim.servers:
            self.sim.schedule(now + 1 + server.index, self._admin, server, "delete_topic", topic, cluster, record)
        self._end_read_lt_write(now, topic)
        return record

    def _wipe(self, now: int, rng: random.Random) -> Record | None:
        groups = [g for g in self.sim.groups if g.idle(now) and g.master() is not None]
        servers = [s for s in self.sim.servers if s.up]
        if not groups or not servers:
            return None
        group, server = rng.choice(groups), rng.choice(servers)
        add = now + rng.randint(5 * MINUTE_MS, 60 * MINUTE_MS) if rng.random() < 0.5 else None
        record = new_record("wipe", group.broker_name, now, cluster=group.cluster, add_ms=add)
        self._admin(now, server, "wipe", group.broker_name, None, record)
        group.busy_until = add + SETTLE_MS if add is not None else FOREVER
        if add is not None:
            self.sim.schedule(add, self._add_back, server, group.broker_name, record)
        return record

    def _add_back(self, now: int, server: SimServer, broker_name: str, record: Record) -> None:
        self._admin(now, server, "add", broker_name, None, record)
        record["end_ms"] = now

    def _admin(self, now: int, server: SimServer, kind: str, arg: str, cluster: str | None, record: Record) -> None:
        if not server.up:
            return  # mqadmin cannot reach a stopped server
        count = server.admin(now, kind, arg, cluster)
        event = {"wipe": "wipe_write_perm", "add": "add_write_perm", "delete_topic": "delete_topic"}[kind]
        effect = {"event": event, "ts": now}
        effect.update({"topic_count": count} if count is not None else {"cluster": cluster})
        note_effect(record, server.ns_id, effect)
