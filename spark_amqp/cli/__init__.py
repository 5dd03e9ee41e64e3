"""spark_amqp.cli: the ``spark-amqp`` command (click; its subcommands are listed in :mod:`.main`).
May import: broker, client, protocol (and ``spark_amqp._version``); an application, on top.
Imported by: ``python -m spark_amqp``, the ``spark-amqp`` script (and, for now, jobs, bench.job)."""
