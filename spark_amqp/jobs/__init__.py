"""spark_amqp.jobs: the example jobs, runnable from any folder once the package is installed.
May import: the package (``register``, ``EmbeddedBroker``), client, protocol (for now also cli).
Imported by: the checkout's ``jobs/*.py``, bench.job, the tests (an application, on top).

- :mod:`.flight_delays`: the main job (``python -m spark_amqp.jobs.flight_delays``; the
  checkout's ``jobs/flight_delays.py`` runs the same code);
- :mod:`.publish_flights`: publish the NYC 2013 flights (``python -m
  spark_amqp.jobs.publish_flights``, the same code as ``spark-amqp publish --flights``).

Same layer as :mod:`spark_amqp.cli` (applications on top of the Spark source/sink).
"""
