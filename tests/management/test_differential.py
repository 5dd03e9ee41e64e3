"""The management HTTP API: the same requests against the embedded broker and RabbitMQ 3.10's
management plugin, comparing status codes and the keys and values that do not depend on the
node (names, counts, arguments, routed, errors).

RabbitMQ's statistics (message_stats, consumers, connections) appear with up to its 5 s
collection delay, so those assertions poll (``Api.wait_for``).
"""

from __future__ import annotations

import time
import urllib.parse

import pika
import pytest

Q_KEYS = {"name", "vhost", "type", "durable", "auto_delete", "exclusive", "arguments", "state", "node"}
# message_stats appears once messages flowed (RabbitMQ omits it before)
Q_STAT_KEYS = {"messages", "messages_ready", "messages_unacknowledged", "consumers", "message_bytes",
               "messages_details"}


def _pub(api, queue: str, payload: str, exchange: str = "amq.default", **props) -> dict:
    r = api.post(f"exchanges/%2F/{exchange}/publish",
                 {"properties": props, "routing_key": queue, "payload": payload, "payload_encoding": "string"})
    assert r.status == 200, r
    return r.json


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


# ---------------------------------------------------------------------------------- auth
def test_login_and_tags(api):
    assert api.get("overview", auth=None).status == 401
    r = api.get("overview", auth="guest:wrong")
    assert r.status == 401
    assert r.json == {"error": "not_authorized", "reason": "Login failed"}
    assert "Basic" in r.headers.get("WWW-Authenticate", "")
    # a user without a management tag may not use the API at all
    r = api.get("overview", auth="mgmt-test-none:pw")
    assert r.status == 401, r
    assert r.json == {"error": "not_authorised", "reason": "Not management user"}
    # management users see their vhosts but not the user list; monitoring users see nodes
    assert api.get("queues", auth="mgmt-test-mgmt:pw").status == 200
    for path, user, reason in (("users", "mgmt", "Not administrator user"), ("nodes", "mgmt", "Not monitor user"),
                               ("users", "mon", "Not administrator user"),
                               ("definitions", "mgmt", "Not administrator user")):
        r = api.get(path, auth=f"mgmt-test-{user}:pw")
        assert (r.status, r.json) == (401, {"error": "not_authorised", "reason": reason}), (path, user)
    assert api.get("nodes", auth="mgmt-test-mon:pw").status == 200
    r = api.get("whoami", auth="mgmt-test-mon:pw")
    assert r.json == {"name": "mgmt-test-mon", "tags": ["monitoring"]}


def test_unknown_path_and_method(api):
    r = api.get("no-such-thing")
    assert r.status == 404
    assert r.json == {"error": "Object Not Found", "reason": "Not Found"}
    r = api.post("overview", {})
    assert r.status == 405
    assert "GET" in r.headers.get("Allow", "")
    assert api.get("queues/%2F/no-such-queue-mgmt-test").json == {"error": "Object Not Found", "reason": "Not Found"}
    assert api.get("queues/no-such-vhost").status == 404


# ---------------------------------------------------------------------------------- queues
def test_queue_declare_get_delete(api, unique):
    name = unique("mq")
    path = f"queues/%2F/{_q(name)}"
    r = api.put(path, {"durable": False, "auto_delete": False, "arguments": {"x-max-length": 10}})
    assert r.status == 201, r
    api.cleanup_paths.append(path)
    assert api.put(path, {"durable": False, "auto_delete": False, "arguments": {"x-max-length": 10}}).status == 204
    r = api.put(path, {"durable": True, "arguments": {"x-max-length": 10}})
    assert r.status == 400
    assert r.json == {"error": "bad_request", "reason": f"inequivalent arg 'durable' for queue '{name}' in vhost "
                                                         f"'/': received 'true' but current is 'false'"}
    assert api.put(path, raw=b"nojson").json == {"error": "bad_request", "reason": "not_json"}
    assert api.put("queues/%2F/amq.mgmt-test", {}).status == 401
    # RabbitMQ's stats arrive in parts (messages before consumers, state, message_bytes)
    q = api.wait_for(lambda: (lambda j: j if Q_KEYS | Q_STAT_KEYS <= set(j) else None)(api.get(path).json),
                     "queue stats")
    assert Q_KEYS | Q_STAT_KEYS <= set(q), Q_KEYS | Q_STAT_KEYS - set(q)
    assert {k: q[k] for k in ("name", "vhost", "type", "durable", "auto_delete", "exclusive", "arguments", "state")} == {
        "name": name, "vhost": "/", "type": "classic", "durable": False, "auto_delete": False, "exclusive": False,
        "arguments": {"x-max-length": 10}, "state": "running"}
    assert api.delete(path + "?if-empty=true").status == 204
    assert api.get(path).status == 404
    assert api.delete(path).status == 404


def test_publish_get_ackmodes_purge(api, unique):
    name = unique("mq")
    path = api.queue(name)
    assert _pub(api, name, "one") == {"routed": True}
    assert _pub(api, name, "two", delivery_mode=2, headers={"h": 1}) == {"routed": True}
    assert _pub(api, name, "three", content_type="text/plain") == {"routed": True}
    assert _pub(api, "no-queue-" + name, "x") == {"routed": False}
    api.wait_for(lambda: api.get(path).json.get("messages") == 3, "3 messages")
    # requeue: the same messages come back, now redelivered
    got = api.post(path + "/get", {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50000}).json
    assert [(m["payload"], m["redelivered"], m["message_count"], m["payload_encoding"], m["exchange"], m["routing_key"])
            for m in got] == [("one", False, 2, "string", "", name), ("two", False, 1, "string", "", name)]
    assert got[0]["properties"] == []
    assert got[1]["properties"] == {"delivery_mode": 2, "headers": {"h": 1}}
    got = api.post(path + "/get", {"count": "1", "ackmode": "ack_requeue_false", "encoding": "base64"}).json
    assert [(m["payload"], m["redelivered"], m["payload_encoding"], m["payload_bytes"]) for m in got] == [
        ("b25l", True, "base64", 3)]
    got = api.post(path + "/get", {"count": 1, "ackmode": "reject_requeue_false", "encoding": "auto",
                                   "truncate": 2}).json
    assert [(m["payload"], m["payload_bytes"], m["message_count"]) for m in got] == [("tw", 3, 1)]
    got = api.post(path + "/get", {"count": 5, "ackmode": "reject_requeue_true", "encoding": "auto"}).json
    assert [(m["payload"], m["properties"]) for m in got] == [("three", {"content_type": "text/plain"})]
    api.wait_for(lambda: api.get(path).json.get("messages") == 1, "1 message left")
    r = api.post(path + "/get", {"count": 5})
    assert r.status == 400
    assert r.json == {"error": "bad_request", "reason": "[{key_missing,ackmode},{key_missing,encoding}]"}
    assert api.delete(path + "?if-empty=true").json == {"error": "bad_request",
                                                        "reason": f"queue '{name}' in vhost '/' not empty"}
    assert api.delete(path + "/contents").status == 204
    api.wait_for(lambda: api.get(path).json.get("messages") == 0, "purged")


def test_publish_errors(api, unique):
    r = api.post("exchanges/%2F/amq.default/publish", {"routing_key": "k", "payload": "x"})
    assert r.status == 400
    assert r.json == {"error": "bad_request", "reason": "[{key_missing,properties},{key_missing,payload_encoding}]"}
    x = unique("nox")
    r = api.post(f"exchanges/%2F/{_q(x)}/publish",
                 {"properties": {}, "routing_key": "k", "payload": "x", "payload_encoding": "string"})
    assert r.status == 400
    assert r.json == {"error": "bad_request", "reason": f"404 NOT_FOUND - no exchange '{x}' in vhost '/'"}


# ---------------------------------------------------------------------------------- exchanges / bindings
def test_exchange_and_bindings(api, unique):
    xn, qn, x2 = unique("mx"), unique("mq"), unique("mx2")
    xpath = f"exchanges/%2F/{_q(xn)}"
    r = api.put(xpath, {"type": "topic", "durable": False, "auto_delete": False, "internal": False, "arguments": {}})
    assert r.status == 201
    api.cleanup_paths.append(xpath)
    assert api.put(xpath, {"type": "topic", "durable": False}).status == 204
    r = api.put(xpath, {"type": "direct", "durable": False})
    assert (r.status, r.json["reason"]) == (400, f"inequivalent arg 'type' for exchange '{xn}' in vhost '/': "
                                                 f"received 'direct' but current is 'topic'")
    # a type name never seen before: RabbitMQ says "invalid" instead once the name is an atom
    # on its node (rabbit_exchange:check_type), so a fixed word like "bogus" is not stable
    bogus = unique("no-such-type")
    assert api.put(f"exchanges/%2F/{_q(unique('bad'))}", {"type": bogus}).json == {
        "error": "bad_request", "reason": f"unknown exchange type '{bogus}'"}
    assert api.put("exchanges/%2F/amq.mgmt-test", {"type": "direct"}).status == 401
    assert api.put(f"exchanges/no-such-vhost-{xn}/x", {"type": "direct"}).status == 404
    x = api.get(xpath).json
    assert {k: x[k] for k in ("name", "vhost", "type", "durable", "auto_delete", "internal", "arguments")} == {
        "name": xn, "vhost": "/", "type": "topic", "durable": False, "auto_delete": False, "internal": False,
        "arguments": {}}
    assert {e["name"] for e in api.get("exchanges/%2F?columns=name").json} >= {"", "amq.direct", "amq.topic", xn}
    api.queue(qn)
    api.exchange(x2, "fanout")
    r = api.post(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}", {"routing_key": "a.#", "arguments": {}})
    assert r.status == 201
    assert r.headers["Location"] == f"{qn}/a.%2523"  # the properties key "a.%23", percent-encoded
    assert api.post(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}", {"routing_key": "b", "arguments": {"x": 1}}).status == 201
    assert api.post(f"bindings/%2F/e/{_q(xn)}/e/{_q(x2)}", {"routing_key": "c"}).status == 201
    r = api.post(f"bindings/%2F/e/{_q(unique('nox'))}/q/{_q(qn)}", {"routing_key": "a"})
    assert r.status == 404 and r.json["error"] == "not_found"

    def shape(bs):
        return sorted((b["source"], b["destination"], b["destination_type"], b["routing_key"], str(b["arguments"]))
                      for b in bs)

    assert shape(api.get(f"queues/%2F/{_q(qn)}/bindings").json) == [
        ("", qn, "queue", qn, "{}"), (xn, qn, "queue", "a.#", "{}"), (xn, qn, "queue", "b", "{'x': 1}")]
    assert shape(api.get(f"exchanges/%2F/{_q(xn)}/bindings/source").json) == [
        (xn, qn, "queue", "a.#", "{}"), (xn, qn, "queue", "b", "{'x': 1}"), (xn, x2, "exchange", "c", "{}")]
    assert shape(api.get(f"exchanges/%2F/{_q(x2)}/bindings/destination").json) == [(xn, x2, "exchange", "c", "{}")]
    between = api.get(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}").json
    assert shape(between) == [(xn, qn, "queue", "a.#", "{}"), (xn, qn, "queue", "b", "{'x': 1}")]
    assert _pub(api, "a.z", "m", exchange=_q(xn)) == {"routed": True}
    assert api.delete(f"{xpath}?if-unused=true").json == {"error": "bad_request",
                                                          "reason": f"exchange '{xn}' in vhost '/' in use"}
    for b in between:
        pk = _q(b["properties_key"])
        assert api.get(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}/{pk}").json["routing_key"] == b["routing_key"]
        assert api.delete(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}/{pk}").status == 204
        assert api.delete(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}/{pk}").status == 404
    assert shape(api.get(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}").json) == []
    assert api.delete("exchanges/%2F/amq.direct").status == 401
    assert api.delete(xpath).status == 204
    assert api.delete(xpath).status == 404


# ---------------------------------------------------------------------------------- lists
def test_columns_sort_pagination(api, unique):
    prefix = unique("page")
    names = [f"{prefix}-{i}" for i in (3, 1, 2)]
    for n in names:
        api.queue(n)
    _pub(api, names[0], "x")
    # the name filter (case-insensitive) applies to paginated requests only, as RabbitMQ's
    flt = f"name={_q(prefix.upper())}&page=1"

    def counts():
        c = [q.get("messages") for q in api.get(f"queues/%2F?{flt}&sort=name").json["items"]]
        return c == [0, 0, 1]

    api.wait_for(counts, "messages [0, 0, 1] in the list", timeout=30)
    # a dotted column whose leaf is missing keeps its (empty) parent, as RabbitMQ
    assert api.get(f"queues/%2F?{flt}&columns=name,messages,arguments.x").json["items"] == [
        {"name": f"{prefix}-1", "messages": 0, "arguments": {}}, {"name": f"{prefix}-2", "messages": 0, "arguments": {}},
        {"name": f"{prefix}-3", "messages": 1, "arguments": {}}]
    assert [q["name"] for q in api.get(f"queues?{flt}&sort=name&sort_reverse=true&columns=name").json["items"]] == [
        f"{prefix}-3", f"{prefix}-2", f"{prefix}-1"]
    assert [q["name"] for q in api.get(f"queues?{flt}&sort=messages&sort_reverse=true&columns=name").json["items"]][0] \
        == f"{prefix}-3"
    assert [q["name"] for q in api.get(f"queues?name={_q(prefix)}.*-[12]&use_regex=true&page=1&sort=name").json["items"]] \
        == [f"{prefix}-1", f"{prefix}-2"]
    flt = f"name={_q(prefix)}"
    page = api.get(f"queues/%2F?{flt}&page=2&page_size=2&sort=name&columns=name").json
    page.pop("total_count")  # RabbitMQ's counts every queue of the shared broker
    assert page == {"filtered_count": 3, "item_count": 1, "items": [{"name": f"{prefix}-3"}], "page": 2,
                    "page_count": 2, "page_size": 2}
    r = api.get(f"queues/%2F?{flt}&page=3&page_size=2")
    assert (r.status, r.json) == (400, {"error": "page_out_of_range",
                                        "reason": "Page out of range, page: 3 page size: 2, len: 3"})
    r = api.get("queues?page=1&page_size=501")
    assert (r.status, r.json) == (400, {"error": "invalid_pagination_parameters",
                                        "reason": "Invalid pagination parameters: page number 1, page size 501"})
    r = api.get("queues?page=x")
    assert (r.status, r.json) == (400, {"error": "bad_request", "reason": "Pagination parameters are invalid"})


def test_overview_vhosts_users_permissions(api):
    o = api.get("overview").json
    assert {"management_version", "rabbitmq_version", "cluster_name", "node", "rates_mode", "exchange_types",
            "listeners", "message_stats", "object_totals", "queue_totals"} <= set(o)
    assert set(o["object_totals"]) >= {"connections", "channels", "exchanges", "queues", "consumers"}
    assert set(o["queue_totals"]) >= {"messages", "messages_ready", "messages_unacknowledged"}
    assert sorted(t["name"] for t in o["exchange_types"]) == ["direct", "fanout", "headers", "topic"]
    assert any(li["protocol"] == "amqp" for li in o["listeners"])
    assert o["rates_mode"] == "basic"
    assert "/" in [v["name"] for v in api.get("vhosts").json]
    assert api.get("vhosts/%2F?columns=name").json == {"name": "/"}
    users = {u["name"]: u for u in api.get("users").json}
    assert users["guest"]["tags"] == ["administrator"]
    assert users["mgmt-test-mon"]["tags"] == ["monitoring"]
    assert set(users["guest"]) >= {"name", "password_hash", "hashing_algorithm", "tags"}
    perms = [p for p in api.get("permissions").json if p["user"] == "guest" and p["vhost"] == "/"]
    assert perms == [{"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]
    nodes = api.get("nodes").json
    assert len(nodes) == 1 and nodes[0]["running"] is True


# ---------------------------------------------------------------------------------- AMQP side
def test_connections_channels_consumers_and_stats(api, unique):
    qn = unique("mq")
    path = api.queue(qn)
    cname = unique("conn")
    params = pika.URLParameters(api.amqp_url)
    params.client_properties = {"connection_name": cname}
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=7)
        for i in range(5):
            ch.basic_publish("", qn, f"m{i}".encode())
        tag = ch.basic_consume(qn, lambda *a: None, auto_ack=False, consumer_tag=unique("ctag"))
        conn.process_data_events(0.2)

        def mine():
            cs = [c for c in api.get("connections").json
                  if (c.get("client_properties") or {}).get("connection_name") == cname]
            return cs[0] if cs and "channels" in cs[0] else None

        c = api.wait_for(mine, "the connection")
        assert {k: c[k] for k in ("user", "vhost", "protocol", "type", "state")} == {
            "user": "guest", "vhost": "/", "protocol": "AMQP 0-9-1", "type": "network", "state": "running"}
        api.wait_for(lambda: (mine() or {}).get("channels") == 1, "one channel")
        assert api.get(f"connections/{_q(c['name'])}").json["name"] == c["name"]
        chans = api.get(f"connections/{_q(c['name'])}/channels").json
        assert [(x["number"], x["connection_details"]["name"]) for x in chans] == [(1, c["name"])]

        def consumer():
            cs = [x for x in api.get("consumers/%2F").json if x["queue"]["name"] == qn]
            return cs[0] if cs else None

        k = api.wait_for(consumer, "the consumer")
        assert {x: k[x] for x in ("consumer_tag", "ack_required", "exclusive", "prefetch_count", "queue")} == {
            "consumer_tag": tag, "ack_required": True, "exclusive": False, "prefetch_count": 7,
            "queue": {"name": qn, "vhost": "/"}}
        q = api.wait_for(lambda: (lambda j: j if j.get("messages_unacknowledged") == 5 and j.get("consumers") == 1
                                  and j.get("message_stats", {}).get("deliver") == 5 else None)(api.get(path).json),
                         "5 unacked deliveries")
        assert q["messages"] == 5 and q["messages_ready"] == 0
        assert q["message_stats"]["publish"] == 5
        assert "rate" in q["message_stats"]["publish_details"]
        # requeued: the consumer gets the 5 again, redelivered
        ch.basic_nack(delivery_tag=0, multiple=True, requeue=True)

        def stats(**want):
            conn.process_data_events(0)
            st = api.get(path).json.get("message_stats", {})
            return all(st.get(k) == v for k, v in want.items()) and st

        api.wait_for(lambda: stats(deliver=10, redeliver=5), "redeliveries counted", timeout=25)
        ch.basic_ack(delivery_tag=0, multiple=True)
        st = api.wait_for(lambda: stats(ack=5), "acks counted", timeout=25)
        assert (st["publish"], st["deliver_get"], st["get"]) == (5, 10, 0)
        api.wait_for(lambda: api.get(path).json.get("messages") == 0, "queue drained")
        # the management API closes the connection: pika sees 320 CONNECTION_FORCED
        assert api.delete(f"connections/{_q(c['name'])}").status == 204
        deadline = time.monotonic() + 15
        with pytest.raises(pika.exceptions.ConnectionClosed) as ei:
            while time.monotonic() < deadline:
                conn.process_data_events(0.2)
        assert ei.value.reply_code == 320
    finally:
        if conn.is_open:
            conn.close()
    api.wait_for(lambda: api.get(f"connections/{_q(c['name'])}").status == 404, "the connection gone")


# ---------------------------------------------------------------------------------- definitions
def test_definitions_export_import(api, unique):
    xn, qn = unique("dx"), unique("dq")
    api.exchange(xn, "topic")
    api.queue(qn, arguments={"x-message-ttl": 60000})
    assert api.post(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}", {"routing_key": "k.*", "arguments": {}}).status == 201
    d = api.get("definitions").json
    assert {"rabbit_version", "users", "vhosts", "permissions", "queues", "exchanges", "bindings"} <= set(d)
    assert [q for q in d["queues"] if q["name"] == qn] == [
        {"name": qn, "vhost": "/", "durable": False, "auto_delete": False, "arguments": {"x-message-ttl": 60000}}]
    assert [x for x in d["exchanges"] if x["name"] == xn] == [
        {"name": xn, "vhost": "/", "type": "topic", "durable": False, "auto_delete": False, "internal": False,
         "arguments": {}}]
    assert [b for b in d["bindings"] if b["source"] == xn] == [
        {"source": xn, "vhost": "/", "destination": qn, "destination_type": "queue", "routing_key": "k.*",
         "arguments": {}}]
    assert not any(x["name"].startswith("amq.") or x["name"] == "" for x in d["exchanges"])
    per_vhost = api.get("definitions/%2F").json
    assert [q for q in per_vhost["queues"] if q["name"] == qn] == [
        {"name": qn, "durable": False, "auto_delete": False, "arguments": {"x-message-ttl": 60000}}]
    # import into a clean slate: the objects come back
    assert api.delete(f"queues/%2F/{_q(qn)}").status == 204
    assert api.delete(f"exchanges/%2F/{_q(xn)}").status == 204
    mine = {"queues": [q for q in d["queues"] if q["name"] == qn],
            "exchanges": [x for x in d["exchanges"] if x["name"] == xn],
            "bindings": [b for b in d["bindings"] if b["source"] == xn]}
    assert api.post("definitions", mine).status in (201, 204)
    assert api.get(f"queues/%2F/{_q(qn)}").json["arguments"] == {"x-message-ttl": 60000}
    assert [b["routing_key"] for b in api.get(f"bindings/%2F/e/{_q(xn)}/q/{_q(qn)}").json] == ["k.*"]


def test_definitions_import_user_by_password_hash(api, unique):
    """A user imported with only RabbitMQ's salted hash logs in with its password over HTTP and
    AMQP, and is exported with the same hash (rabbit_definitions:add_user)."""
    from spark_amqp.broker.passwords import hash_password

    name, pw = unique("def-user"), "s3cret-pw"
    h = hash_password(pw)
    api.cleanup_paths.append(f"users/{_q(name)}")   # RabbitMQ; the embedded broker keeps it (405)
    d = {"users": [{"name": name, "password_hash": h, "hashing_algorithm": "rabbit_password_hashing_sha256",
                    "tags": "management"}],
         "permissions": [{"user": name, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]}
    assert api.post("definitions", d).status in (201, 204)
    assert api.get("whoami", auth=f"{name}:{pw}").json["name"] == name
    assert api.get("whoami", auth=f"{name}:wrong").status == 401
    [u] = [u for u in api.get("definitions").json["users"] if u["name"] == name]
    assert (u["password_hash"], u["hashing_algorithm"]) == (h, "rabbit_password_hashing_sha256")
    assert api.get(f"users/{_q(name)}").json["password_hash"] == h
    params = pika.URLParameters(api.amqp_url)
    params.credentials = pika.PlainCredentials(name, pw)
    conn = pika.BlockingConnection(params)
    assert conn.is_open
    conn.close()


def test_definitions_import_bad_hash_imports_nothing(embedded_api, unique):
    """A hash that is not valid for its algorithm: 400 naming the user, no user, queue or
    exchange imported (every user is checked before anything is applied)."""
    name, qn = unique("bad-hash-user"), unique("bad-hash-q")
    d = {"users": [{"name": name, "password_hash": "bm90LWEtaGFzaA==", "tags": "management"}],
         "queues": [{"name": qn, "vhost": "/", "durable": False, "auto_delete": False, "arguments": {}}]}
    r = embedded_api.post("definitions", d)
    assert r.status == 400 and name in r.json["reason"], r
    assert embedded_api.get(f"users/{_q(name)}").status == 404
    assert embedded_api.get(f"queues/%2F/{_q(qn)}").status == 404
