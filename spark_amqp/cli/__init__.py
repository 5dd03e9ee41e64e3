"""spark_amqp.cli"""
