"""Smoke tests of the codec core; the full property/differential/fuzz suites live beside it."""

from spark_amqp.protocol import (BasicProperties, ContentMessage, Decoder, FrameError,
                                 encode_message, spec)


def test_publish_round_trip_in_one_byte_chunks():
    props = BasicProperties(content_type="application/json", delivery_mode=2,
                            headers={"a": "x", "n": 5})
    data = encode_message(1, spec.Basic.Publish(0, "ex", "rk", True, False), props, b"x" * 300,
                          frame_max=4096)
    whole = Decoder().feed(data)
    dec = Decoder()
    pieces = []
    for i in range(len(data)):
        pieces += dec.feed(data[i:i + 1])
    assert pieces == whole
    [msg] = whole
    assert isinstance(msg, ContentMessage)
    assert msg.method.routing_key == "rk" and msg.method.mandatory is True
    assert msg.properties == props and msg.body == b"x" * 300


def test_bad_frame_end_is_frame_error():
    data = bytearray(encode_message(1, spec.Basic.Publish(), None, b"abc"))
    data[-1] = 0
    try:
        Decoder().feed(bytes(data))
    except FrameError as exc:
        assert exc.reply_code == 501 and exc.connection_level
    else:
        raise AssertionError("expected FrameError")
