"""The name server's small key-value stores: KV config (100/101/102/219) and its own config (318/319).

RocketMQ keeps both next to the route tables: ``KVConfigManager`` (``namesrv/kvconfig``) and the
``Configuration`` built from ``NamesrvConfig`` + ``NettyServerConfig``. Neither affects routes
(docs/nameserver-semantics.md A5, A6): the processor only reads ``ORDER_TOPIC_CONFIG`` to answer
REGISTER_BROKER. Both live in memory only; persisting KV is optional (docs/remoting-protocol.md §7
notes) and not done here.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from common.config import NameServerConfig

# REGISTER_BROKER answers with this namespace's KVTable when it exists (docs/remoting-protocol.md
# §7, code 103).
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"

# 318: these two answer "Can not update config path" (4.9.7's explicit check, before the blacklist).
CONFIG_PATH_KEYS = frozenset({"kvConfigPath", "configStorePath"})
# 318: RocketMQ's default blacklist plus rocketmqHome (always blacklisted by 4.9.7) plus every key
# naming one of our route timers (docs/nameserver-semantics.md A6: timers are fixed for a run,
# logged in ns_start).
CONFIG_BLACKLIST = frozenset(
    {
        "configBlackList",
        "configStorePath",
        "kvConfigPath",
        "rocketmqHome",
        "brokerExpiryMs",
        "broker_expiry_ms",
        "scanIntervalMs",
        "scan_interval_ms",
        "scanNotActiveBrokerInterval",
        "firstScanDelayMs",
        "first_scan_delay_ms",
        "brokerChannelExpiredTime",
        "channelIdleMs",
        "channel_idle_ms",
        "serverChannelMaxIdleTimeSeconds",
    }
)


class KVConfigManager:
    """RocketMQ's ``KVConfigManager``: namespace -> key -> value, in memory.

    An emptied namespace stays (as ``{}``), exactly as RocketMQ's delete leaves the inner map.
    """

    def __init__(self) -> None:
        self.config_table: dict[str, dict[str, str]] = {}

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100)."""
        self.config_table.setdefault(namespace, {})[key] = value

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG (101): the value, or None (QUERY_NOT_FOUND)."""
        return self.config_table.get(namespace, {}).get(key)

    def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102): always succeeds; the namespace map stays even when emptied."""
        table = self.config_table.get(namespace)
        if table is not None:
            table.pop(key, None)

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        """GET_KVLIST_BY_NAMESPACE (219): a copy of the namespace, or None if it never existed."""
        table = self.config_table.get(namespace)
        return None if table is None else dict(table)


class NamesrvConfigStore:
    """The properties GET_NAMESRV_CONFIG (319) lists and UPDATE_NAMESRV_CONFIG (318) changes.

    Starts with the keys of RocketMQ 4.x's ``NamesrvConfig`` and their defaults, the listen port
    and our timers (read-only, docs/nameserver-semantics.md A6). Updates may add keys; like
    RocketMQ's ``Configuration.update`` they land in the map whether or not anything reads them,
    and none of them changes routing.

    Args:
        initial: extra or overriding entries (e.g. the timers of this run).
    """

    def __init__(self, initial: Mapping[str, str] | None = None) -> None:
        self.properties: dict[str, str] = {
            "clusterTest": "false",
            "configStorePath": "namesrv/namesrv.properties",
            "kvConfigPath": "namesrv/kvConfig.json",
            "orderMessageEnable": "false",
            "productEnvName": "center",
        }
        if initial:
            self.properties.update(initial)

    def check_update(self, properties: Mapping[str, str]) -> str | None:
        """The NO_PERMISSION remark for an update touching a forbidden key, else None (318)."""
        if CONFIG_PATH_KEYS & properties.keys():
            return "Can not update config path"
        if CONFIG_BLACKLIST & properties.keys():
            return "Can not update config in black list."
        return None

    def update(self, properties: Mapping[str, str]) -> None:
        """Apply an update that :meth:`check_update` allowed."""
        self.properties.update(properties)

    def snapshot(self) -> dict[str, str]:
        """A copy of every property."""
        return dict(self.properties)


def own_properties(config: NameServerConfig, listen_port: int) -> dict[str, str]:
    """This run's listen port and timers, as :class:`NamesrvConfigStore` shows them."""
    return {
        "listenPort": str(listen_port),
        "brokerExpiryMs": str(config.broker_expiry_ms),
        "scanIntervalMs": str(config.scan_interval_ms),
        "firstScanDelayMs": str(config.first_scan_delay_ms),
        "channelIdleMs": str(config.channel_idle_ms),
    }
