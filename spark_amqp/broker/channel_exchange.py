"""The exchange class on the broker side: declare, delete, bind, unbind (AMQP 0-9-1 class
``exchange``; exchange-to-exchange bindings are RabbitMQ's extension, rabbitmq.com/docs/e2e).
Checks (permissions, reserved names, arguments) are :mod:`.rules`'; the exchanges themselves
are the vhost's (:mod:`.vhost`).

Part of :class:`~.channel.Channel` (a mixin over the channel's ``conn``, ``vhost``, ``send``).
"""

from __future__ import annotations

from ..protocol import spec
from ..protocol.errors import AccessRefused
from .rules import check_binding, check_exchange_declare

__all__ = ["ExchangeMethods"]

_X = spec.Exchange


class ExchangeMethods:
    """The exchange-class methods of a channel."""

    METHODS = {_X.Declare: "on_exchange_declare", _X.Delete: "on_exchange_delete",
               _X.Bind: "on_exchange_bind", _X.Unbind: "on_exchange_unbind"}

    def on_exchange_declare(self, method) -> None:
        cid, mid = method.CLASS_ID, method.METHOD_ID
        if not method.passive:
            c = self.conn
            check_exchange_declare(c.perm, c.user, self.vhost.name, method.exchange, method.arguments or {},
                                   cid, mid)
        self.vhost.declare_exchange(method.exchange, method.type, method.passive, method.durable,
                                    method.auto_delete, method.internal, method.arguments or {})
        if not method.no_wait:
            self.send(spec.Exchange.DeclareOk())

    def on_exchange_delete(self, method) -> None:
        self.conn.check_perm("configure", "exchange", method.exchange, method.CLASS_ID, method.METHOD_ID)
        self.vhost.delete_exchange(method.exchange, method.if_unused)
        if not method.no_wait:
            self.send(spec.Exchange.DeleteOk())

    def _bind_ex(self, method, bind: bool) -> None:
        cid, mid = method.CLASS_ID, method.METHOD_ID
        v = self.vhost
        c = self.conn
        if method.source == "" or method.destination == "":
            raise AccessRefused("operation not permitted on the default exchange")
        if bind:
            src = v.get_exchange(method.source, cid, mid)
            dst = v.get_exchange(method.destination, cid, mid)
        else:
            src = v.exchanges.get(method.source)
            dst = v.exchanges.get(method.destination)
        check_binding(c.perm, c.user, v.name, method.source, "exchange", method.destination, cid, mid)
        if src is not None and dst is not None:
            if bind:
                v.bind(src, dst, method.routing_key, method.arguments or {})
            else:
                v.unbind(src, dst, method.routing_key, method.arguments or {})
        if not method.no_wait:
            self.send(spec.Exchange.BindOk() if bind else spec.Exchange.UnbindOk())

    def on_exchange_bind(self, method) -> None:
        self._bind_ex(method, True)

    def on_exchange_unbind(self, method) -> None:
        self._bind_ex(method, False)
