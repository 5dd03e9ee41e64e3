# The two commands: `make demo` runs the main job on the embedded broker, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: venv demo test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,examples,broker]'
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) jobs/flight_delays.py --demo

test: venv
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: venv
	$(PY) -m spark_amqp.bench all

clean:
	rm -rf $(VENV) build *.egg-info
