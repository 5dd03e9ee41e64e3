"""A Spark Python process without ``spark_amqp`` gets an error saying what to do.

``spark_amqp.register`` registers the import guard (pickled by value). Here the pickled class
is loaded in a Python that has pyspark but not spark_amqp (``-S``: the site-packages folder is
on the path, but its ``.pth`` files, among them the editable install's, are not read), as
Spark's ``create_data_source`` worker does; calling it must raise the guard's error. No Spark.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig


def test_guard_class_travels_without_the_package_and_explains(tmp_path):
    from pyspark import cloudpickle

    from spark_amqp.spark.import_guard import guarded_data_source

    (tmp_path / "guard.pkl").write_bytes(cloudpickle.dumps(guarded_data_source("/the/driver/python")))
    code = (
        "import pickle, sys\n"
        "try:\n"
        "    import spark_amqp\n"
        "    sys.exit('spark_amqp is importable: the test proves nothing')\n"
        "except ImportError:\n"
        "    pass\n"
        "cls = pickle.loads(open('guard.pkl', 'rb').read())\n"
        "assert cls.name() == 'amqp'\n"
        "try:\n"
        "    cls({'queue': 'q'}).schema()\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    env = {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "spark_amqp cannot be imported in this Spark Python process" in r.stdout
    assert "export PYSPARK_PYTHON=/the/driver/python" in r.stdout
    assert "PYTHONPATH" in r.stdout and "--py-files" in r.stdout


def test_guard_delegates_to_the_data_source():
    from spark_amqp.spark.import_guard import guarded_data_source

    cls = guarded_data_source(sys.executable)
    assert cls({"queue": "q"}).schema().fieldNames()[:2] == ["body", "queue"]
    try:
        cls({"queue": "q", "nosuchoption": "1"}).schema()
    except ValueError as exc:
        assert "nosuchoption" in str(exc).lower()
    else:
        raise AssertionError("an unknown option must fail as the real source's does")
