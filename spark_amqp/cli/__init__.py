"""spark_amqp.cli: the ``spark-amqp`` command (click; its subcommands are listed in :mod:`.main`).
Only commands: the libraries they use are in :mod:`spark_amqp.tools`.
May import: tools, management, broker, client, protocol (and ``spark_amqp._version``); an
application, on top.
Imported by: ``python -m spark_amqp``, the ``spark-amqp`` script (and jobs.publish_flights, bench)."""
