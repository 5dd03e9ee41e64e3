"""``python -m spark_amqp`` runs the ``spark-amqp`` command line."""

from .cli.main import main

if __name__ == "__main__":
    main()
