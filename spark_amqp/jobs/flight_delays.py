"""The main job of spark-amqp: flight delays per origin airport, carrier and hour of event
time, from an AMQP queue or super stream (the package :mod:`spark_amqp.jobs.delays` holds it
and describes it).

This module is its entry point: ``python -m spark_amqp.jobs.flight_delays --demo`` from any
folder, and the file ``spark-submit`` runs (``spark-submit ... $(python -c 'import
spark_amqp.jobs.flight_delays as job; print(job.__file__)') --uri ...``; in a checkout
``jobs/flight_delays.py`` runs it too). It also re-exports the package's functions for the
notebook and the benchmarks (``from spark_amqp.jobs.flight_delays import build_spark``).
"""

from __future__ import annotations

import sys

from spark_amqp.jobs.delays.command import command, main, parse_args
from spark_amqp.jobs.delays.data import *  # noqa: F401,F403  (names, defaults, schemas)
from spark_amqp.jobs.delays.data import __all__ as _data_names
from spark_amqp.jobs.delays.demo import demo, publish_flights_to_super_stream
from spark_amqp.jobs.delays.job import (JobOptions, JobResult, batch_writer, flights_written,
                                        job_options, read_results, run_job, unread_offsets,
                                        write_json_result)
from spark_amqp.jobs.delays.live import LivePublisher, live_demo, live_figures
from spark_amqp.jobs.delays.session import (CONF_DIR, JOB_SQL_CONF, apply_job_conf, build_spark,
                                            read_spark_defaults)
from spark_amqp.jobs.delays.summary import print_summary
from spark_amqp.jobs.delays.topology import (declare_alerts, declare_super_stream_fresh,
                                             declare_topology, queue_depth)
from spark_amqp.jobs.delays.transforms import alert_messages, result_rows, window_aggregates

__all__ = [*_data_names, "CONF_DIR", "JOB_SQL_CONF", "JobOptions", "JobResult", "LivePublisher",
           "alert_messages", "apply_job_conf", "batch_writer", "build_spark", "command",
           "declare_alerts", "declare_super_stream_fresh", "declare_topology", "demo",
           "flights_written", "job_options", "live_demo", "live_figures", "main", "parse_args",
           "print_summary", "publish_flights_to_super_stream", "queue_depth", "read_results",
           "read_spark_defaults", "result_rows", "run_job", "unread_offsets", "window_aggregates",
           "write_json_result"]

if __name__ == "__main__":
    sys.exit(main())
