"""Runs :mod:`spark_amqp.jobs.flight_delays` (``python -m spark_amqp.jobs.flight_delays`` from any folder).

Kept so that ``python jobs/flight_delays.py`` and ``spark-submit jobs/flight_delays.py`` work in a
checkout. When ``spark_amqp`` is not importable (a checkout without ``pip install``), the
checkout is put on ``sys.path`` of this process only: Spark's Python workers still need
the package (README, "Install" and "Running on a cluster").
"""

import sys
from pathlib import Path

try:
    import spark_amqp  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_amqp.jobs.flight_delays import *  # noqa: E402,F401,F403  (the notebook imports from here)
from spark_amqp.jobs.flight_delays import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
