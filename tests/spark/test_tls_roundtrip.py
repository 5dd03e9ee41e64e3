"""The amqp sink and source over ``amqps://``: 100 rows written with ``df.write.format("amqp")``
and read back with ``spark.readStream.format("amqp")`` (AvailableNow into a memory sink), both
through the embedded broker's TLS listener with the ``cacertfile`` option (certificate and
host name verified). The certificate is a throwaway self-signed one for localhost/127.0.0.1
made with the ``openssl`` CLI (skipped with a reason when it is missing)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from spark_amqp.broker import EmbeddedBroker
from spark_amqp.broker.config import TLSConfig
from spark_amqp.client import connect

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    """(embedded broker with an amqps listener, path of the CA file clients must trust)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed: cannot make a test certificate")
    d = tmp_path_factory.mktemp("spark-tls")
    cert, key = d / "server.pem", d / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert),
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    with EmbeddedBroker(tls=TLSConfig(str(cert), str(key))) as b:
        yield b, str(cert)


def test_write_and_stream_read_over_amqps(spark, tls_broker, unique, tmp_path):
    broker, ca = tls_broker
    url = broker.tls_url
    q = unique("spark-tls")
    with connect(url, cacertfile=ca) as conn, conn.channel() as ch:
        ch.queue_declare(q, durable=True)
    schema = StructType([StructField("body", BinaryType()), StructField("message_id", StringType())])
    df = spark.createDataFrame([(f"row-{i}".encode(), f"id-{i}") for i in range(100)], schema).repartition(2)
    try:
        (df.write.format("amqp").option("uri", url).option("cacertfile", ca)
         .option("verify", "verify_peer").option("serverNameIndication", "localhost")
         .option("exchange", "").option("routingKey", q).mode("append").save())
        stream = (spark.readStream.format("amqp").option("uri", url).option("cacertfile", ca)
                  .option("queue", q).load())
        sq = (stream.writeStream.format("memory").queryName("tls_roundtrip")
              .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        assert sq.awaitTermination(120), "AvailableNow query over amqps did not finish"
        assert sq.exception() is None
        out = spark.table("tls_roundtrip")
        key = F.col("message_id")
        assert_df_equality(out.select("body", "message_id").orderBy(key), df.orderBy(key),
                           ignore_nullable=True)
        assert {r.queue for r in out.select("queue").distinct().collect()} == {q}
    finally:
        with connect(url, cacertfile=ca) as conn, conn.channel() as ch:
            ch.queue_delete(q)
