"""Benchmark scripts, each runnable as ``python -m spark_amqp.bench.<name>``.

Each prints its figures side by side with a named baseline measured in the same run and the
same process (e.g. :mod:`spark_amqp.bench.codec`: our codec vs pika's).
"""
