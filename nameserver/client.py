"""A small asyncio remoting client: what our tests, the live fleet and the benches talk through.

One connection, pipelined requests matched to answers by ``opaque`` (docs/remoting-protocol.md
§3.3), oneway sends, and request builders for the codes the name server handles, with the right
extFields (§6, §7) and bodies (§8). The builders are plain functions, so a caller can also encode a
frame once and send it many times.

Example:
    >>> client = await RemotingClient.connect("127.0.0.1", 9876)
    >>> await client.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
    ...                              DataVersion(100, 1), [TopicConfig("TopicA", 8, 8)])
    >>> (await client.get_route_info("TopicA")).code
    0
    >>> await client.close()
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from nameserver.acl import Credentials, sign_request
from nameserver.codec import (
    SERVER_VERSION,
    FrameDecoder,
    MalformedFrame,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    body_crc32,
    encode_frame,
    encode_register_body,
    fastjson,
    make_request,
    to_ext_fields,
)
from nameserver.model import DataVersion, TopicConfig

DEFAULT_TIMEOUT_S = 10.0


class RemotingError(Exception):
    """The connection failed or closed before the answer came."""


# ---------------------------------------------------------------------- request builders


def register_broker_request(
    cluster: str,
    broker_addr: str,
    broker_name: str,
    broker_id: int,
    ha_addr: str,
    data_version: DataVersion,
    topics: Iterable[TopicConfig],
    filter_servers: Iterable[str] | None = (),
    *,
    version: int = SERVER_VERSION,
    compressed: bool = False,
    with_crc: bool = True,
    serialize_type: int = SerializeType.JSON,
) -> RemotingCommand:
    """REGISTER_BROKER (103) as a broker sends it: header fields of §7, body of §8, CRC of §8.2."""
    body = encode_register_body(data_version, topics, filter_servers, version=version, compressed=compressed)
    ext = to_ext_fields(
        {
            "brokerName": broker_name,
            "brokerAddr": broker_addr,
            "clusterName": cluster,
            "haServerAddr": ha_addr,
            "brokerId": broker_id,
            "compressed": compressed,
            "bodyCrc32": body_crc32(body) if with_crc else None,
        }
    )
    return make_request(RequestCode.REGISTER_BROKER, ext, body, version=version, serialize_type=serialize_type)


def unregister_broker_request(cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> RemotingCommand:
    """UNREGISTER_BROKER (104)."""
    ext = to_ext_fields(
        {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster, "brokerId": broker_id}
    )
    return make_request(RequestCode.UNREGISTER_BROKER, ext)


def route_request(
    topic: str,
    *,
    version: int = SERVER_VERSION,
    accept_standard_json_only: bool | None = None,
    serialize_type: int = SerializeType.JSON,
) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC (105)."""
    ext = to_ext_fields({"topic": topic, "acceptStandardJsonOnly": accept_standard_json_only})
    return make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=version, serialize_type=serialize_type)


def simple_request(
    code: int,
    ext: Mapping[str, object] | None = None,
    body: bytes | None = None,
    *,
    oneway: bool = False,
    version: int = SERVER_VERSION,
) -> RemotingCommand:
    """Any request: extFields values are written as §6 text, ``None`` omitted."""
    return make_request(code, to_ext_fields(ext) if ext is not None else None, body, oneway=oneway, version=version)


# ---------------------------------------------------------------------- the client


class _ClientProtocol(asyncio.Protocol):
    def __init__(self, client: RemotingClient) -> None:
        self._client = client
        self._decoder = FrameDecoder()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._client._transport = cast(asyncio.Transport, transport)  # a stream connection's

    def data_received(self, data: bytes) -> None:
        try:
            self._decoder.feed(data)
            for cmd in self._decoder:
                self._client._deliver(cmd)
        except MalformedFrame as exc:
            self._client._fail(RemotingError(f"malformed answer: {exc}"))
            self._client._transport.abort()  # type: ignore[union-attr]  # data comes after connection_made set it

    def connection_lost(self, exc: Exception | None) -> None:
        self._client._fail(RemotingError(f"connection closed: {exc}" if exc else "connection closed"))

    def pause_writing(self) -> None:
        self._client._can_write.clear()

    def resume_writing(self) -> None:
        self._client._can_write.set()


class RemotingClient:
    """One connection to a remoting server. Create with :meth:`connect`.

    Args:
        credentials: when given, every request is signed with them (``nameserver.acl.sign_request``).
        clock: epoch ms for the signatures' timestamps; the wall clock by default.

    Attributes:
        closed: a future done when the connection has ended.
        remote: ``host:port`` of the server.
    """

    def __init__(self, credentials: Credentials | None = None, clock: Callable[[], int] | None = None) -> None:
        self.credentials = credentials
        self._clock = clock or _wall_clock_ms
        self._transport: asyncio.Transport | None = None
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._next_opaque = 0
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._error: Exception | None = None
        self.closed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.remote = ""
        self.unsolicited: list[RemotingCommand] = []

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        timeout: float = DEFAULT_TIMEOUT_S,
        credentials: Credentials | None = None,
        clock: Callable[[], int] | None = None,
    ) -> RemotingClient:
        """Open a connection; with ``credentials`` every request on it is signed (``clock`` as
        for the constructor).

        Raises:
            OSError: the server cannot be reached.
        """
        client = cls(credentials, clock)
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.create_connection(lambda: _ClientProtocol(client), host, port), timeout)
        client.remote = f"{host}:{port}"
        return client

    @property
    def is_open(self) -> bool:
        """True while the connection is up."""
        return self._error is None and self._transport is not None and not self._transport.is_closing()

    @property
    def local_address(self) -> str:
        """Our ``host:port`` as the server logs it in ``remote``."""
        sock = self._transport.get_extra_info("sockname") if self._transport else None
        return f"{sock[0]}:{sock[1]}" if sock else ""

    def _opaque(self) -> int:
        self._next_opaque = (self._next_opaque + 1) & 0x7FFFFFFF
        return self._next_opaque

    def _deliver(self, cmd: RemotingCommand) -> None:
        waiter = self._waiters.pop(cmd.opaque, None)
        if waiter is None:
            self.unsolicited.append(cmd)
        elif not waiter.done():
            waiter.set_result(cmd)

    def _fail(self, exc: Exception) -> None:
        if self._error is None:
            self._error = exc
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            if not waiter.done():
                waiter.set_exception(exc)
        if not self.closed.done():
            self.closed.set_result(None)
        self._can_write.set()

    def _check_open(self) -> asyncio.Transport:
        if self._error is not None:
            raise RemotingError(str(self._error))
        if self._transport is None or self._transport.is_closing():
            raise RemotingError("connection closed")
        return self._transport

    async def request(self, cmd: RemotingCommand, timeout: float = DEFAULT_TIMEOUT_S) -> RemotingCommand:
        """Send a request (a fresh opaque is set on it) and wait for its answer.

        Raises:
            RemotingError: the connection ended first.
            asyncio.TimeoutError: no answer within ``timeout``.
        """
        transport = self._check_open()
        cmd.opaque = self._opaque()
        cmd.flag &= ~2  # a request that waits for an answer is not oneway
        self._sign(cmd)
        future = asyncio.get_running_loop().create_future()
        self._waiters[cmd.opaque] = future
        transport.write(encode_frame(cmd))
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiters.pop(cmd.opaque, None)

    async def oneway(self, cmd: RemotingCommand) -> None:
        """Send a request flagged oneway (§3.2): no answer is expected."""
        transport = self._check_open()
        cmd.opaque = self._opaque()
        cmd.flag |= 2
        self._sign(cmd)
        transport.write(encode_frame(cmd))
        await self.drain()

    def _sign(self, cmd: RemotingCommand) -> None:
        # Every request, as RocketMQ's AclClientRPCHook does; servers ignore the keys where
        # unneeded. Signed at each send: a resent command needs a new timestamp and nonce, since
        # the server refuses a signature it has already seen.
        if self.credentials is not None:
            sign_request(cmd, self.credentials, self._clock(), secrets.token_hex(8))

    async def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests: malformed frames, split frames)."""
        self._check_open().write(data)
        await self.drain()

    def expect(self, opaque: int) -> asyncio.Future[Any]:
        """A future for the answer with this opaque (for frames sent with :meth:`send_raw`)."""
        future = asyncio.get_running_loop().create_future()
        if self._error is not None:
            future.set_exception(RemotingError(str(self._error)))
        else:
            self._waiters[opaque] = future
        return future

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        await self._can_write.wait()

    async def close(self) -> None:
        """Close the connection and wait until it has ended."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), 5)
        except TimeoutError:
            if self._transport is not None:
                self._transport.abort()

    def abort(self) -> None:
        """Drop the connection at once."""
        if self._transport is not None:
            self._transport.abort()

    # ------------------------------------------------------------------ helpers per request code

    async def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_addr: str,
        data_version: DataVersion,
        topics: Iterable[TopicConfig],
        filter_servers: Iterable[str] | None = (),
        **kwargs: Any,
    ) -> RemotingCommand:
        """REGISTER_BROKER (103); keyword arguments as :func:`register_broker_request`."""
        return await self.request(
            register_broker_request(
                cluster, broker_addr, broker_name, broker_id, ha_addr, data_version, topics, filter_servers, **kwargs
            )
        )

    async def unregister_broker(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> RemotingCommand:
        """UNREGISTER_BROKER (104)."""
        return await self.request(unregister_broker_request(cluster, broker_addr, broker_name, broker_id))

    async def get_route_info(self, topic: str, **kwargs: Any) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC (105); keyword arguments as :func:`route_request`."""
        return await self.request(route_request(topic, **kwargs))

    async def route(self, topic: str) -> dict[str, Any] | None:
        """The parsed route of ``topic`` (``fastjson.parse_route`` shape), None for TOPIC_NOT_EXIST."""
        answer = await self.get_route_info(topic)
        if answer.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        _expect_success(answer)
        return fastjson.parse_route(answer.body or b"{}")

    async def get_broker_cluster_info(self) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO (106)."""
        return await self.request(simple_request(RequestCode.GET_BROKER_CLUSTER_INFO))

    async def cluster_info(self) -> dict[str, Any]:
        """The parsed ClusterInfo (``fastjson.parse_cluster_info`` shape)."""
        answer = await self.get_broker_cluster_info()
        _expect_success(answer)
        return fastjson.parse_cluster_info(answer.body or b"{}")

    async def get_all_topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), parsed."""
        answer = await self.request(simple_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        _expect_success(answer)
        topics: list[str] = fastjson.parse_topic_list(answer.body or b"{}")["topic_list"]
        return topics

    async def get_topics_by_cluster(self, cluster: str) -> list[str]:
        """GET_TOPICS_BY_CLUSTER (224), parsed."""
        answer = await self.request(simple_request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster}))
        _expect_success(answer)
        topics: list[str] = fastjson.parse_topic_list(answer.body or b"{}")["topic_list"]
        return topics

    async def wipe_write_perm(self, broker_name: str) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (205): ext ``wipeTopicCount``."""
        return await self.request(simple_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name}))

    async def add_write_perm(self, broker_name: str) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER (327): ext ``addTopicCount``."""
        return await self.request(simple_request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker_name}))

    async def delete_topic(self, topic: str, cluster: str | None = None) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (216)."""
        return await self.request(
            simple_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})
        )

    async def query_data_version(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, data_version: DataVersion
    ) -> RemotingCommand:
        """QUERY_DATA_VERSION (322): ext ``changed``, body the stored DataVersion."""
        ext = {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster, "brokerId": broker_id}
        return await self.request(
            simple_request(RequestCode.QUERY_DATA_VERSION, ext, fastjson.encode_data_version(data_version))
        )

    async def broker_heartbeat(self, cluster: str, broker_addr: str, broker_name: str) -> None:
        """BROKER_HEARTBEAT (904), oneway as 5.x brokers send it."""
        await self.oneway(
            simple_request(
                RequestCode.BROKER_HEARTBEAT,
                {"clusterName": cluster, "brokerAddr": broker_addr, "brokerName": broker_name},
            )
        )

    async def put_kv_config(self, namespace: str, key: str, value: str) -> RemotingCommand:
        """PUT_KV_CONFIG (100)."""
        return await self.request(
            simple_request(RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})
        )

    async def get_kv_config(self, namespace: str, key: str) -> RemotingCommand:
        """GET_KV_CONFIG (101): ext ``value``."""
        return await self.request(simple_request(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key}))

    async def delete_kv_config(self, namespace: str, key: str) -> RemotingCommand:
        """DELETE_KV_CONFIG (102)."""
        return await self.request(simple_request(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key}))

    async def get_kv_list_by_namespace(self, namespace: str) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE (219): body KVTable."""
        return await self.request(simple_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}))

    async def update_namesrv_config(self, properties_text: str) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (318) with a ``.properties`` body."""
        return await self.request(
            simple_request(RequestCode.UPDATE_NAMESRV_CONFIG, None, properties_text.encode("utf-8"))
        )

    async def get_namesrv_config(self) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (319): body ``key=value`` lines."""
        return await self.request(simple_request(RequestCode.GET_NAMESRV_CONFIG))


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _expect_success(answer: RemotingCommand) -> None:
    if answer.code != ResponseCode.SUCCESS:
        raise RemotingError(f"request failed: code {answer.code} remark {answer.remark!r}")


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` to ``(host, port)``.

    Raises:
        ValueError: not HOST:PORT.
    """
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not HOST:PORT: {text!r}")
    return host.strip("[]"), int(port)
