"""The stream part of the management API (/api/stream/..., RabbitMQ's rabbitmq_stream_management)
on both brokers: the same endpoints, the same JSON fields with the same types, the same counts.
RabbitMQ needs the plugin (``rabbitmq-plugins enable rabbitmq_stream_management``; .ci/run
enables it); without it the RabbitMQ case skips."""

from __future__ import annotations

import asyncio
import urllib.parse
import uuid

import pytest
from session_guard import unique_name

rstream = pytest.importorskip("rstream")

FIELD_SETS = {
    "connection": {"auth_mechanism", "channel_max", "client_properties", "connected_at", "frame_max", "host", "name",
                   "node", "peer_cert_issuer", "peer_cert_subject", "peer_cert_validity", "peer_host", "peer_port",
                   "port", "protocol", "ssl", "ssl_cipher", "ssl_hash", "ssl_key_exchange", "ssl_protocol", "timeout",
                   "user", "user_provided_name", "user_who_performed_action", "vhost",
                   # figures RabbitMQ adds once the connection's stats were emitted (~5 s)
                   "channels", "garbage_collection", "recv_cnt", "recv_oct", "recv_oct_details", "reductions",
                   "reductions_details", "send_cnt", "send_oct", "send_oct_details", "send_pend", "state"},
    "publisher": {"confirmed", "connection_details", "errored", "published", "publisher_id", "queue", "reference"},
    "consumer": {"connection_details", "consumed", "credits", "offset", "offset_lag", "properties", "queue",
                 "subscription_id"},
}


def _stream_port(api, request) -> int:
    if api.kind == "rabbitmq":
        if api.get("stream/connections").status == 404:
            pytest.skip("RabbitMQ's rabbitmq_stream_management plugin is not enabled")
        return 5552
    return request.getfixturevalue("mgmt_broker").stream_port


async def _clients(port: int, stream: str, name: str, work):
    from rstream import AMQPMessage, Consumer, ConsumerOffsetSpecification, OffsetType, Producer

    p = Producer("127.0.0.1", port, username="guest", password="guest", connection_name=name + "-p")
    await p.start()
    await p.create_stream(stream)
    c = Consumer("127.0.0.1", port, username="guest", password="guest", connection_name=name + "-c")
    await c.start()
    try:
        await p.send_batch(stream, [AMQPMessage(body=b"x"), AMQPMessage(body=b"y")])

        async def cb(m, ctx):
            pass
        await c.subscribe(stream, cb, offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
        await asyncio.get_running_loop().run_in_executor(None, work)
    finally:
        await p.delete_stream(stream)
        await c.close()
        await p.close()


def test_stream_connections_publishers_consumers(api, request):
    port = _stream_port(api, request)
    stream = unique_name("h38b-mgmt")
    name = "h38b-" + uuid.uuid4().hex[:6]
    seen = {}

    def work():
        mine = lambda rows: [r for r in rows if r.get("queue", {}).get("name") == stream]  # noqa: E731
        pubs = api.wait_for(lambda: [p for p in mine(api.get("stream/publishers").json)
                                     if p["confirmed"] == 2], "the publisher's 2 confirms")
        # RabbitMQ's first figures are the subscription's (offset: the next one); later ones the
        # last chunk's first offset: wait for those
        cons = api.wait_for(lambda: [c for c in mine(api.get("stream/consumers").json)
                                     if c["consumed"] == 2 and c["offset"] == 0], "the consumer's 2 messages")
        def both():
            cs = [c for c in api.get("stream/connections").json if c["user_provided_name"].startswith(name)]
            return cs if len(cs) == 2 and all(FIELD_SETS["connection"] <= set(c) for c in cs) else None
        conns = api.wait_for(both, "the two connections with their figures")
        seen.update(pubs=pubs, cons=cons, conns=conns)
        pc = next(c for c in conns if c["user_provided_name"] == name + "-p")
        q = urllib.parse.quote(pc["name"], safe="")
        seen["one"] = api.get(f"stream/connections/%2F/{q}").json
        seen["conn_pubs"] = api.get(f"stream/connections/%2F/{q}/publishers").json
        seen["vhost_pubs"] = mine(api.get("stream/publishers/%2F").json)
        seen["stream_pubs"] = api.get(f"stream/publishers/%2F/{stream}").json
        seen["vhost_cons"] = mine(api.get("stream/consumers/%2F").json)
        seen["missing"] = api.get("stream/connections/%2F/nope").status
    asyncio.run(asyncio.wait_for(_clients(port, stream, name, work), 90))
    [p] = seen["pubs"]
    assert set(p) == FIELD_SETS["publisher"]
    assert (p["published"], p["confirmed"], p["errored"], p["publisher_id"], p["reference"]) == (2, 2, 0, 0, "")
    [c] = seen["cons"]
    assert set(c) == FIELD_SETS["consumer"]
    assert (c["consumed"], c["offset"], c["offset_lag"], c["subscription_id"], c["properties"]) == (2, 0, 0, 0, {})
    assert isinstance(c["credits"], int) and isinstance(c["offset_lag"], int)
    conns = seen["conns"]
    assert len(conns) == 2 and [set(x) ^ FIELD_SETS["connection"] for x in conns] == [set(), set()]
    x = conns[0]
    assert (x["protocol"], x["user"], x["vhost"], x["channel_max"], x["ssl"]) == ("stream", "guest", "/", 0, False)
    assert x["frame_max"] == 1048576 and x["timeout"] == 60 and x["ssl_cipher"] is None
    assert x["client_properties"]["product"] == "RabbitMQ Stream"
    assert x["state"] == "running" and x["recv_oct"] > 0 and x["send_oct"] > 0
    assert seen["one"]["ssl_cipher"] == "" and set(seen["one"]) == FIELD_SETS["connection"]
    assert seen["conn_pubs"] == [p] and seen["stream_pubs"] == [p] and seen["vhost_pubs"] == [p]
    assert seen["vhost_cons"] == [c]
    assert seen["missing"] == 404


def test_delete_closes_a_stream_connection(embedded_api, mgmt_broker):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent.parent / "broker"))
    from stream_raw import RawStream

    with RawStream(mgmt_broker.stream_port) as c:
        c.handshake()
        [row] = embedded_api.wait_for(lambda: embedded_api.get("stream/connections").json, "the connection")
        q = urllib.parse.quote(row["name"], safe="")
        assert embedded_api.delete(f"stream/connections/%2F/{q}").status == 204
        from spark_amqp.protocol import stream as S
        assert c.wait_for(S.Close).closing_code == S.Code.OK
