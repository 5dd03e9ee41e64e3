"""The queue class on the broker side: declare, bind, unbind, purge, delete (AMQP 0-9-1 class
``queue``), and the channel's "last declared queue" that an empty queue name means (0-9-1
queue.bind/consume/get/purge/delete: "if the queue name is empty, the server uses the last
queue declared on the channel"). Checks are :mod:`.rules`'; the queues are the vhost's.

Part of :class:`~.channel.Channel` (a mixin over the channel's ``conn``, ``vhost``,
``last_queue``, ``send``).
"""

from __future__ import annotations

from ..protocol import spec
from ..protocol.errors import AccessRefused, AMQPNotImplemented, NotFound, PreconditionFailed
from .names import new_name
from .queue import Queue
from .rules import check_binding, check_queue_declare

__all__ = ["QueueMethods"]

_Q = spec.Queue


class QueueMethods:
    """The queue-class methods of a channel, and resolving a queue name."""

    METHODS = {_Q.Declare: "on_queue_declare", _Q.Bind: "on_queue_bind",
               _Q.Unbind: "on_queue_unbind", _Q.Purge: "on_queue_purge", _Q.Delete: "on_queue_delete"}

    def _queue_name(self, name: str, cid: int, mid: int) -> str:
        if name == "":
            if self.last_queue is None:
                raise NotFound("no previously declared queue", cid, mid)
            return self.last_queue
        return name

    def _queue_to_read(self, method, cid: int, mid: int) -> Queue:
        """The queue named by ``method.queue`` ("" = the channel's last declared one) for
        basic.get / queue.purge: 404 NOT_FOUND when it does not exist (or 405 when another
        connection holds it exclusively), 403 ACCESS_REFUSED without read permission on it
        (RabbitMQ access-control.html: consume, get and purge need "read")."""
        name = self._queue_name(method.queue, cid, mid)
        q = self.vhost.get_queue(name, self.conn, cid, mid)
        self.conn.check_perm("read", "queue", name, cid, mid)
        return q

    def on_queue_declare(self, method) -> None:
        cid, mid = method.CLASS_ID, method.METHOD_ID
        name = method.queue
        server_named = False
        if name == "" and not method.passive:
            name = new_name("amq.gen-")
            server_named = True
        elif name == "" and method.passive:
            name = self._queue_name("", cid, mid)
        if not method.passive:
            c = self.conn
            check_queue_declare(c.perm, c.user, self.vhost.name, name, method.arguments or {}, cid, mid)
        q = self.vhost.declare_queue(self.conn, name, method.passive, method.durable, method.exclusive,
                                     method.auto_delete, method.arguments or {}, server_named)
        self.last_queue = q.name
        if not method.no_wait:
            self.send(spec.Queue.DeclareOk(queue=q.name, message_count=q.message_count,
                                           consumer_count=q.consumer_count))

    def _binding_queue_name(self, method) -> str:
        """The queue a queue.bind / queue.unbind names (:meth:`_queue_name`); 403
        ACCESS_REFUSED for a binding to the default exchange (RabbitMQ 3.10)."""
        cid, mid = method.CLASS_ID, method.METHOD_ID
        name = self._queue_name(method.queue, cid, mid)
        if method.exchange == "":
            raise AccessRefused("operation not permitted on the default exchange")
        return name

    def on_queue_bind(self, method) -> None:
        cid, mid = method.CLASS_ID, method.METHOD_ID
        v = self.vhost
        c = self.conn
        name = self._binding_queue_name(method)
        q = v.get_queue(name, c, cid, mid)
        x = v.get_exchange(method.exchange, cid, mid)
        check_binding(c.perm, c.user, v.name, method.exchange, "queue", name, cid, mid)
        v.bind(x, q, method.routing_key, method.arguments or {})
        if not method.no_wait:
            self.send(spec.Queue.BindOk())

    def on_queue_unbind(self, method) -> None:
        cid, mid = method.CLASS_ID, method.METHOD_ID
        v = self.vhost
        c = self.conn
        name = self._binding_queue_name(method)
        q = v.queues.get(name)
        if q is not None:
            q = v.get_queue(name, c, cid, mid)
        x = v.exchanges.get(method.exchange)
        # unbind needs what bind needs: write on the queue *and* read on the exchange
        check_binding(c.perm, c.user, v.name, method.exchange, "queue", name, cid, mid)
        if q is not None and x is not None:
            v.unbind(x, q, method.routing_key, method.arguments or {})
        self.send(spec.Queue.UnbindOk())

    def on_queue_purge(self, method) -> None:
        q = self._queue_to_read(method, method.CLASS_ID, method.METHOD_ID)
        if q.stream:
            raise AMQPNotImplemented(f"queue.purge not supported by stream queues queue '{q.name}' in vhost "
                                     f"'{self.vhost.name}'")
        n = q.purge()
        if not method.no_wait:
            self.send(spec.Queue.PurgeOk(message_count=n))

    def on_queue_delete(self, method) -> None:
        cid, mid = method.CLASS_ID, method.METHOD_ID
        name = self._queue_name(method.queue, cid, mid)
        v = self.vhost
        q = v.queues.get(name)
        n = 0
        if q is not None:
            q = v.get_queue(name, self.conn, cid, mid)
            self.conn.check_perm("configure", "queue", name, cid, mid)
            if method.if_unused and q.consumers:
                raise PreconditionFailed(f"queue '{name}' in vhost '{v.name}' in use")
            # RabbitMQ 3.10.8 deletes a non-empty stream despite if-empty (it has no "ready" messages)
            if method.if_empty and q.message_count and not q.stream:
                raise PreconditionFailed(f"queue '{name}' in vhost '{v.name}' is not empty")
            n = v.delete_queue(q)
        if not method.no_wait:
            self.send(spec.Queue.DeleteOk(message_count=n))
