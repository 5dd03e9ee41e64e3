"""spark_amqp.spark"""
