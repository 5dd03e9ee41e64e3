# The two commands: `make demo` runs the main job on the embedded broker, `make test` runs the tests
# (`make check`: the tiers that start no JVM, docs/development.md "Test tiers and the fast check").
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: venv demo test check bench clean

# setup.py compiles the optional compiled twins (spark_amqp/**/_*.pyx, Cython; listed in setup.py)
$(VENV)/.installed: pyproject.toml setup.py $(wildcard spark_amqp/*/_*.pyx spark_amqp/*/*/_*.pyx spark_amqp/*/_*.pxd)
	@echo "==> creating the virtual environment $(VENV) (once; later runs reuse it)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> upgrading pip in $(VENV)"
	$(PY) -m pip install -q --upgrade pip
	@echo "==> installing spark-amqp with its test, examples, broker and docs extras (PySpark and"
	@echo "    ~110 other packages, then compiling the Cython twins): about 3 minutes on 2 cores"
	$(PY) -m pip install -e '.[test,examples,broker,docs]'
	@echo "==> compiling the package's bytecode"
	# bytecode for the editable install (also where PYTHONDONTWRITEBYTECODE is set): the
	# generated codec (spark_amqp/protocol/methods.py) then imports without compiling
	$(PY) -m compileall -q spark_amqp
	touch $@
	@echo "==> $(VENV) is ready"

venv: $(VENV)/.installed

demo: venv
	$(PY) jobs/flight_delays.py --demo

test: venv
	$(PY) -m pytest -q -p no:cacheprovider --durations=25 tests
	# the codec once more in pure Python (the run above uses the compiled fast paths when built)
	SPARK_AMQP_PURE_PYTHON=1 SPARK_AMQP_REQUIRE_SPEEDUPS= $(PY) -m pytest -q -p no:cacheprovider tests/protocol

check: venv
	$(PY) -m pytest -q -p no:cacheprovider -m "not spark and not cluster and not rabbitmq_cluster" tests

bench: venv
	$(PY) -m spark_amqp.bench all

clean:
	rm -rf $(VENV) build *.egg-info
	find spark_amqp -name '_*.c' -delete -o -name '_*.so' -delete
