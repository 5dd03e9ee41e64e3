"""The one failure model (spark_amqp.client.failover): the classification of errors, the
back-off and the failover window on a fake clock, the one BrokerUnreachable."""

from __future__ import annotations

import pickle
import ssl

import pytest

from spark_amqp.client import ConfirmTimeout, ConnectionLost, ProtocolMismatch, PublishNacked
from spark_amqp.client.connection import AllAddressesFailed
from spark_amqp.client.failover import (AddressErrors, Backoff, BrokerUnreachable, Failure,
                                        FailoverWindow, addresses_avoiding, classify, retryable,
                                        several_addresses)
from spark_amqp.client.messages import ConfirmResult
from spark_amqp.protocol.errors import (AccessRefused, ChannelErrorCode, ConnectionForced,
                                        FrameError, InternalError, NotAllowed, NotFound,
                                        PreconditionFailed, ResourceError, ResourceLocked)

LOST, UNAVAILABLE, REFUSED = Failure.LOST, Failure.UNAVAILABLE, Failure.REFUSED


@pytest.mark.parametrize("error, kind", [
    (ConnectionLost("reset"), LOST),
    (ConnectionResetError("reset by peer"), LOST),
    (ConnectionRefusedError("refused"), LOST),
    (EOFError(), LOST),
    (ConnectionForced("CONNECTION_FORCED - broker forced connection closure"), LOST),
    (AllAddressesFailed("every address refused"), LOST),
    (PreconditionFailed("PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed "
                        "out. Timeout value used: 1800000 ms."), LOST),
    (ResourceError("RESOURCE_ERROR - queue 's' in vhost '/' does not have a running local "
                   "replica"), UNAVAILABLE),
    (PreconditionFailed("PRECONDITION_FAILED - queue 's' in vhost '/' does not have a "
                        "replica on the local node"), UNAVAILABLE),
    (InternalError("INTERNAL_ERROR"), UNAVAILABLE),
    (NotFound("NOT_FOUND - home node 'rabbit@x' of durable queue 'q' in vhost '/' is down or "
              "inaccessible"), UNAVAILABLE),
    (ProtocolMismatch("AMQP 1.0 header"), UNAVAILABLE),
    (AccessRefused("ACCESS_REFUSED - Login was refused"), REFUSED),
    (NotAllowed("NOT_ALLOWED - vhost x not found"), REFUSED),
    (NotFound("NOT_FOUND - no queue 'q' in vhost '/'"), REFUSED),
    (PreconditionFailed("PRECONDITION_FAILED - inequivalent arg 'x-queue-type'"), REFUSED),
    (ResourceError("RESOURCE_ERROR - cannot allocate"), REFUSED),
    (ResourceLocked("RESOURCE_LOCKED - exclusive use"), REFUSED),
    (FrameError("FRAME_ERROR"), REFUSED),
    (ChannelErrorCode("CHANNEL_ERROR"), REFUSED),
    (ssl.SSLCertVerificationError("certificate verify failed"), REFUSED),
    (TimeoutError("no delivery for 30 s"), REFUSED),
    (ConfirmTimeout(3, 1.0), REFUSED),
    (PublishNacked(ConfirmResult(acked=0, nacked=[1], returned=[])), REFUSED),
    (ValueError("bad option"), REFUSED),
])
def test_one_classification(error, kind):
    assert classify(error) is kind
    assert retryable(error) is (kind is not REFUSED)


def test_backoff_doubles_up_to_its_max_on_an_injected_clock():
    now = [100.0]
    b = Backoff(0.5, 5.0, clock=lambda: now[0])
    assert b.due() and b.left() == 0.0
    waits = [b.failed() for _ in range(6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert b.next_attempt == 105.0 and not b.due() and b.left() == 5.0
    now[0] = 105.0
    assert b.due()
    b.retry_now()
    assert b.next_attempt == 105.0 and b.delay == 5.0
    b.reset()
    assert (b.delay, b.next_attempt) == (0.5, 0.0)
    fixed = Backoff(0.25, 0.25, clock=lambda: now[0])
    assert [fixed.failed() for _ in range(3)] == [0.25, 0.25, 0.25]
    with pytest.raises(ValueError):
        Backoff(2.0, 1.0)


def test_failover_window_runs_from_the_first_failure_in_a_row():
    now = [0.0]
    w = FailoverWindow(10.0, clock=lambda: now[0])
    assert not w.expired() and w.left() == 10.0 and w.elapsed() == 0.0
    now[0] = 3.0
    assert w.failed() == 0.0 and w.failing_since == 3.0
    now[0] = 12.0
    assert w.failed() == 9.0 and not w.expired() and w.left() == 1.0
    now[0] = 13.0
    assert w.expired()
    w.succeeded()
    assert w.failing_since is None and not w.expired()
    assert FailoverWindow(0.0, clock=lambda: 5.0).failed() == 0.0
    zero = FailoverWindow(0.0, clock=lambda: 5.0)
    zero.failed()
    assert zero.expired()           # 0: no second round


def test_broker_unreachable_is_one_picklable_oserror_listing_the_addresses():
    e = BrokerUnreachable("no node for 5 s", {"h1:1": ConnectionLost("refused")})
    assert isinstance(e, ConnectionLost) and isinstance(e, ConnectionError)
    assert str(e) == "no node for 5 s" and e.errno is None
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is BrokerUnreachable and str(back) == str(e)
    assert str(back.errors["h1:1"]) == "refused"
    a = AllAddressesFailed("could not connect", {"h2:2": ConnectionLost("down")})
    assert isinstance(a, BrokerUnreachable)
    back = pickle.loads(pickle.dumps(a))
    assert type(back) is AllAddressesFailed and list(back.errors) == ["h2:2"]


def test_addresses():
    assert several_addresses("amqp://u:p@h1,h2/%2F")
    assert not several_addresses("amqp://u:p@h1/%2F")
    assert several_addresses("amqp://u:p@h1/%2F", {"addresses": "h1,h2:5673"})
    assert not several_addresses("not a uri")
    addrs = [("h1", 1), ("h2", 2), ("h3", 3)]
    assert addresses_avoiding(addrs, {"h1:1"}, shuffle=False) == [("h2", 2), ("h3", 3),
                                                                 ("h1", 1)]
    for _ in range(10):
        assert addresses_avoiding(addrs, {"h2:2"})[-1] == ("h2", 2)
    errors = AddressErrors("amqp://u:secret@h1:1,h2:2/%2F", {})
    errors.record(AllAddressesFailed("x", {"h1:1": ConnectionLost("refused")}))
    text = errors.describe()
    assert "h1:1: ConnectionLost: refused" in text and "h2:2: no error recorded" in text
    assert "secret" not in errors.redacted
