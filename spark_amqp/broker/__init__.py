"""spark_amqp.broker"""
