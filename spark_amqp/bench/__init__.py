"""spark_amqp.bench: benchmark scripts, each runnable as ``python -m spark_amqp.bench.<name>``.
May import: spark, client, protocol, the package (``register``, ``EmbeddedBroker``); bench.job
also cli and jobs for now (tests/test_layers.py lists it). Imported by: its ``__main__``, tests.

Each prints its figures side by side with a named baseline measured in the same run and the
same process (e.g. :mod:`spark_amqp.bench.codec`: our codec vs pika's).
"""
