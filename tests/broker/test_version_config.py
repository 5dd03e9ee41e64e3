"""The broker's rabbitmq_version setting (issue 30): config file, EmbeddedBroker, defaults."""

from __future__ import annotations

import pytest

from spark_amqp import EmbeddedBroker
from spark_amqp.broker.config import BrokerConfig, ConfigError, load_config

MiB = 1024 * 1024


def test_default_is_4_3_with_its_16_mib_limit():
    cfg = BrokerConfig()
    assert (cfg.rabbitmq_version, cfg.max_message_size) == ("4.3", 16 * MiB)
    assert BrokerConfig(rabbitmq_version="3.10").max_message_size == 128 * MiB
    assert BrokerConfig(rabbitmq_version="3.10.8").rabbitmq_version == "3.10"
    assert BrokerConfig(rabbitmq_version="3.10", max_message_size=1000).max_message_size == 1000


def test_config_file_version_and_explicit_limit(tmp_path):
    p = tmp_path / "b.toml"
    p.write_text('[broker]\nrabbitmq_version = "3.10"\n')
    assert load_config(p).max_message_size == 128 * MiB
    p.write_text('[broker]\nmax_message_size = 5000\nrabbitmq_version = "3.10"\n')
    assert load_config(p).max_message_size == 5000          # explicit wins over the version's
    assert load_config(None, rabbitmq_version="3.10").max_message_size == 128 * MiB
    p.write_text('[broker]\nrabbitmq_version = "5.0"\n')
    with pytest.raises(ConfigError, match=r"\[broker\] rabbitmq_version must be one of 3.10, 4.3"):
        load_config(p)


def test_embedded_broker_argument_copies_the_config():
    cfg = BrokerConfig()
    with EmbeddedBroker(config=cfg, rabbitmq_version="3.10") as b:
        assert b.config.rabbitmq_version == "3.10" and b.config.max_message_size == 128 * MiB
    assert cfg.rabbitmq_version == "4.3"   # the caller's object is not changed
