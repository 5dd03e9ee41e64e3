"""The store file at start: corrupt, truncated or on a read-only filesystem gives one clear
error naming the file (never a silent start with part of the data missing). ~2 s."""

from __future__ import annotations

import os
import subprocess

import pika
import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker import BrokerConfig, BrokerError

pytestmark = pytest.mark.faults


def _config() -> BrokerConfig:
    cfg = BrokerConfig()
    cfg.disk_free_limit = 0  # small test filesystems: no disk alarm
    return cfg


def _fill(data_dir: str, n: int = 100) -> str:
    with EmbeddedBroker(data_dir=data_dir, config=_config()) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = c.channel()
        ch.queue_declare("q", durable=True)
        ch.confirm_delivery()
        for i in range(n):
            ch.basic_publish("", "q", b"%04d" % i + b"x" * 4000, pika.BasicProperties(delivery_mode=2))
        c.close()
    path = os.path.join(data_dir, "broker.sqlite3")
    assert os.path.getsize(path) > 64 * 1024
    return path


def _damage(path: str, how: str) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if how == "truncated":
            f.truncate(size // 2)
        elif how == "truncated-at-page":
            f.truncate((size // 2) // 4096 * 4096)
        elif how == "header":
            f.write(b"not a database at all, sorry" * 4)
        elif how == "page-in-the-middle":
            f.seek((size // 2) // 4096 * 4096)
            f.write(bytes(range(256)) * 16)


@pytest.mark.parametrize("how", ["truncated", "truncated-at-page", "header", "page-in-the-middle"])
def test_damaged_store_refuses_to_start_naming_the_file(tmp_path, how):
    path = _fill(str(tmp_path))
    _damage(path, how)
    with pytest.raises(BrokerError) as ei:
        EmbeddedBroker(data_dir=tmp_path).start()
    msg = str(ei.value)
    assert path in msg and "corrupt or truncated" in msg and "backup" in msg


def test_intact_store_still_starts(tmp_path):
    _fill(str(tmp_path), 50)
    with EmbeddedBroker(data_dir=tmp_path) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        assert c.channel().queue_declare("q", durable=True, passive=True).method.message_count == 50
        c.close()


def test_read_only_data_dir_at_start_is_a_clear_error(small_fs):
    data = small_fs("8m")
    path = _fill(data, 20)
    subprocess.run(["mount", "-o", "remount,ro", data], check=True, capture_output=True)
    try:
        with pytest.raises(BrokerError) as ei:
            EmbeddedBroker(data_dir=data, config=_config()).start()
        msg = str(ei.value)
        assert path in msg and "writable" in msg
    finally:
        subprocess.run(["mount", "-o", "remount,rw", data], check=True, capture_output=True)
    with EmbeddedBroker(data_dir=data, config=_config()) as b:  # writable again: everything is there
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        assert c.channel().queue_declare("q", durable=True, passive=True).method.message_count == 20
        c.close()
