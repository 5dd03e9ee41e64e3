"""spark_amqp.jobs: the example jobs, runnable from any folder once the package is installed.
May import: the package (``register``, ``EmbeddedBroker``), tools, cli (its ``--uri`` check and
topology helper), spark, client, protocol.
Imported by: the checkout's ``jobs/*.py``, bench (an application, on top).

- :mod:`.delays`: the main job, a package of its own modules (data, session, transforms, job,
  topology, demo, live, summary, command);
- :mod:`.flight_delays`: its entry point (``python -m spark_amqp.jobs.flight_delays``; the file
  ``spark-submit`` runs; the checkout's ``jobs/flight_delays.py`` runs the same code);
- :mod:`.publish_flights`: publish the NYC 2013 flights (``python -m
  spark_amqp.jobs.publish_flights``, the same code as ``spark-amqp publish --flights``).
"""
