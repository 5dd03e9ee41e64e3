"""Which RabbitMQ release the broker behaves like: ``"3.10"`` or ``"4.3"`` (the default).

``BrokerConfig.rabbitmq_version`` (``[broker] rabbitmq_version`` in ``broker.toml``,
``EmbeddedBroker(rabbitmq_version=...)``, ``spark-amqp broker --rabbitmq-version``) picks one
:class:`Behaviour`. ``"3.10"`` copies RabbitMQ 3.10.8, the release the differential and
conformance tests compare with; ``"4.3"`` (the default: what users deploy in 2026) applies
every difference below, each read in rabbitmq/rabbitmq-server at the tag ``v4.3.0``
(docs/broker/rabbitmq-versions.md has the table with the same sources):

==============================  ======  ======  ================================================
field                           3.10    4.3     source (rabbitmq-server, tag v4.3.0)
==============================  ======  ======  ================================================
max_message_size                128 MiB 16 MiB  deps/rabbit/Makefile ``{max_message_size,
                                                16777216}``; release-notes/4.0.1.md
min_frame_max                   4096    8192    deps/rabbit_common/include/rabbit_framing.hrl
                                                ``FRAME_MIN_SIZE 8192``; rabbit_reader
                                                ``validate_negotiated_integer_value``;
                                                release-notes/4.1.0.md
initial_frame_max               4096    8192    rabbit_reader ``initial_frame_max`` defaults
                                                to ``?FRAME_MIN_SIZE``
quorum_delivery_limit           none    20      rabbit_quorum_queue ``DEFAULT_DELIVERY_LIMIT``;
                                                release-notes/4.0.1.md
requeue_counts_delivery         True    False   rabbit_channel: basic.nack/basic.recover
                                                requeue -> ``requeue`` (rabbit_fifo ``return``,
                                                DeliveryFailed=false); basic.reject requeue ->
                                                ``{modify, true, ...}``; a consumer that goes
                                                ``down`` -> return_all(DeliveryFailed=true);
                                                release-notes/4.3.0.md
global_qos                      True    False   rabbit_channel ``is_global_qos_permitted``
                                                (deprecated feature ``global_qos``,
                                                denied_by_default): global=true acts as false
transient_nonexcl_queues        True    False   rabbit_amqqueue ``is_queue_args_combination_
                                                permitted``: 541 INTERNAL_ERROR with the
                                                deprecated feature's when_denied text
classic_queue_v1                True    False   rabbit_amqqueue ``check_queue_version``
                                                ("unsupported queue version '1'");
                                                release-notes/4.3.0.md (x-queue-mode refused)
interpret_published_x_death     True    False   mc_amqpl ``is_internal_header(<<"x-death">>)``,
                                                deaths kept as annotations; 4.0.1.md
stream_filtering                False   True    rabbit_stream_queue ``filter_spec/1``,
                                                ``stream_message/2``, ``check_filter_size/1``;
                                                osiris ``osiris_bloom.erl`` (3.13+); 3.10.8
                                                ignores x-stream-filter* (tried: every message
                                                delivered, any filter size accepted)
stream_conversion               3.10    4.3     how 0-9-1 messages are stored in a stream as
                                                AMQP 1.0 and read back: 3.10.8
                                                ``rabbit_msg_record.erl``; 4.3 ``mc_amqpl.erl``
                                                / ``mc_amqp.erl`` (protocol/amqp10/convert.py)
==============================  ======  ======  ================================================

Not modelled (no such feature in the embedded broker in either mode): policies (so 4.x
ignoring ``ha-*`` keys changes nothing here) and consumer timeouts (RabbitMQ 3.10 closes a
channel whose delivery is unacked for 30 min; 4.3 only for quorum queues).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Behaviour", "BEHAVIOURS", "DEFAULT_VERSION", "VERSIONS", "behaviour"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Behaviour:
    """The version-dependent rules of the broker (see the module docstring for sources).

    Fields: ``version`` ("3.10"/"4.3"); ``max_message_size`` (bytes, the default when the
    config sets none); ``min_frame_max`` (bytes, the smallest frame_max a client may choose
    in connection.tune-ok); ``initial_frame_max`` (bytes of frame payload accepted before
    tune-ok); ``quorum_delivery_limit`` (the x-delivery-limit of a quorum queue declared
    without one; None = unlimited); ``requeue_counts_delivery`` (whether basic.nack/
    basic.recover with requeue count toward the delivery limit); ``global_qos`` (whether
    basic.qos global=true limits the channel); ``transient_nonexcl_queues`` (whether a
    non-durable non-exclusive queue may be declared); ``classic_queue_v1`` (whether
    x-queue-mode and x-queue-version=1 are accepted); ``interpret_published_x_death``
    (whether a published message's own x-death header is continued when it is dead-lettered);
    ``stream_filtering`` (whether streams keep a Bloom filter per chunk and honour the
    consumer arguments ``x-stream-filter``/``x-stream-match-unfiltered``, and the declare
    argument ``x-stream-filter-size-bytes`` is checked; :mod:`.stream_filter`);
    ``stream_conversion`` ("3.10"/"4.3": the 0-9-1 <-> AMQP 1.0 conversions of stream
    messages, :mod:`.stream_convert`); ``release`` (the full release reported as the broker's
    version, as RabbitMQ reports its own: the management API's ``rabbitmq_version``, the
    stream protocol's peer properties; "3.10.8" is the release the tests compare with, "4.3.5"
    the one whose sources the stream protocol was read in).
    """

    version: str
    max_message_size: int
    min_frame_max: int
    initial_frame_max: int
    quorum_delivery_limit: int | None
    requeue_counts_delivery: bool
    global_qos: bool
    transient_nonexcl_queues: bool
    classic_queue_v1: bool
    interpret_published_x_death: bool
    stream_filtering: bool = False
    stream_conversion: str = "4.3"
    release: str = "4.3.5"


BEHAVIOURS: dict[str, Behaviour] = {
    "3.10": Behaviour("3.10", max_message_size=128 * MiB, min_frame_max=4096, initial_frame_max=4096,
                      quorum_delivery_limit=None, requeue_counts_delivery=True, global_qos=True,
                      transient_nonexcl_queues=True, classic_queue_v1=True,
                      interpret_published_x_death=True, stream_filtering=False,
                      stream_conversion="3.10", release="3.10.8"),
    "4.3": Behaviour("4.3", max_message_size=16 * MiB, min_frame_max=8192, initial_frame_max=8192,
                     quorum_delivery_limit=20, requeue_counts_delivery=False, global_qos=False,
                     transient_nonexcl_queues=False, classic_queue_v1=False,
                     interpret_published_x_death=False, stream_filtering=True,
                     stream_conversion="4.3", release="4.3.5"),
}
VERSIONS = tuple(BEHAVIOURS)
#: the newest modelled release: what users run
DEFAULT_VERSION = "4.3"


def behaviour(version: str) -> Behaviour:
    """The :class:`Behaviour` of ``version`` ("3.10" or "4.3"; "3.10.8", "4.3.0" and other
    patch releases are accepted). Raises ValueError naming the versions known."""
    v = str(version).strip()
    if v not in BEHAVIOURS:
        parts = v.split(".")
        v = ".".join(parts[:2])
    if v not in BEHAVIOURS:
        raise ValueError(f"rabbitmq_version must be one of {', '.join(VERSIONS)} (the RabbitMQ "
                         f"release the broker behaves like), got {version!r}")
    return BEHAVIOURS[v]


def transient_nonexcl_denied_text() -> str:
    """RabbitMQ 4.3's connection.close text (541 INTERNAL_ERROR) for a non-durable,
    non-exclusive queue.declare: ``rabbit_deprecated_features`` ``when_denied`` message of
    ``transient_nonexcl_queues`` (phase denied_by_default), prefixed "INTERNAL_ERROR - " and
    cut to 255 characters by ``rabbit_binary_generator:amqp_exception_explanation``."""
    return ("Feature `transient_nonexcl_queues` is deprecated.\n"
            "By default, this feature is not permitted anymore.\n"
            "The feature will be removed from a future major RabbitMQ version, regardless of the "
            "configuration; actual version to be determined.\n"
            "To continue using this feature when it is not permitted by default, set the "
            "following parameter in your configuration:\n"
            "    \"deprecated_features.permit.transient_nonexcl_queues = true\"")
