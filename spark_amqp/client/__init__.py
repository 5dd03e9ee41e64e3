"""spark_amqp.client"""
