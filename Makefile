# acklab: `make setup && make run` (main job on the embedded local cluster), `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3.11
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
KAFKA_VERSIONS ?= 4.3.1 3.9.2 3.6.2 3.5.2
# Producer client versions besides the locked one (each its own virtualenv under .cache/clients).
CLIENT_VERSIONS ?= 2.0.2 2.2.0 2.3.0
# Java producer clients (kafka-clients): the newest 4.x the default Kafka ships and one 3.x; the Java
# producer driver (plugins/acklab/workload/java) is compiled against each. More by this variable, or
# `acklab setup --java-client-version X` on demand.
JAVA_CLIENT_VERSIONS ?= 4.3.1 3.9.1
JAVA_DRIVER := $(wildcard plugins/acklab/workload/java/*.java)
RUN_CONF ?= {}
# The producer processes' compiled hot path (the record format and the delivery callback), built in
# place: the producer processes of every client version import acklab from plugins/.
RECORDS_EXT := plugins/acklab/workload/records$(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')

export PATH := $(BIN):$(PATH)
export AIRFLOW_HOME := $(CURDIR)/airflow_home
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(AIRFLOW_HOME)/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__UNIT_TEST_MODE := False
export AIRFLOW_CONN_SPARK_DEFAULT := {"conn_type":"spark","host":"local[*]"}

.PHONY: setup system-deps run test test-unit reap clean bench-proxy bench-load

JARS_STAMP := .cache/.jars-$(subst $() ,_,$(KAFKA_VERSIONS) $(CLIENT_VERSIONS) java $(JAVA_CLIENT_VERSIONS))
setup: system-deps $(VENV)/.installed $(RECORDS_EXT) $(JARS_STAMP) .cache/.spark-classes $(AIRFLOW_HOME)/.migrated

# Java 17 with its compiler (Kafka, Spark, the Java producer driver), Maven (jar downloads), ps (Spark's launcher), a C compiler and Python's headers
# (RECORDS_EXT), from Debian's packages if missing; as root also iptables (node-to-node link faults need
# root; without it those faults fail at plan time).
system-deps:
	@missing=""; command -v javac >/dev/null || missing="$$missing openjdk-17-jdk-headless"; \
	command -v cc >/dev/null || missing="$$missing gcc"; \
	$(PYTHON) -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_path("include") + "/Python.h"))' \
	  || missing="$$missing python3.11-dev"; \
	command -v mvn >/dev/null || missing="$$missing maven"; command -v ps >/dev/null || missing="$$missing procps"; \
	if [ "$$(id -u)" = 0 ] && ! command -v iptables >/dev/null; then missing="$$missing iptables"; fi; \
	if [ -n "$$missing" ]; then apt-get update -qq && apt-get install -y -qq $$missing; fi

$(VENV)/.installed: requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/pip || $(BIN)/python -m ensurepip >/dev/null
	$(BIN)/python -m pip install -q uv==0.13.9
	$(BIN)/uv pip install -q --compile-bytecode -p $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install -q -p $(BIN)/python --no-deps -e .
	touch $@

$(RECORDS_EXT): plugins/acklab/workload/records.pyx $(VENV)/.installed
	rm -f $@  # a new file, not one rewritten under the processes that have the old one loaded
	cd plugins && $(BIN)/cythonize -i -q acklab/workload/records.pyx && rm -rf build

.cache/.jars-%: $(VENV)/.installed $(RECORDS_EXT) plugins/acklab/base/maven.py plugins/acklab/cluster/class_archive.py plugins/acklab/workload/librdkafka.py plugins/acklab/workload/java_client.py $(JAVA_DRIVER)
	$(BIN)/acklab setup $(addprefix --kafka-version ,$(KAFKA_VERSIONS)) $(addprefix --client-version ,$(CLIENT_VERSIONS)) \
	  $(addprefix --java-client-version ,$(JAVA_CLIENT_VERSIONS))
	mkdir -p .cache && touch $@

# The Spark driver's class archive, dumped by auditing synthetic evidence (acklab.tools.spark_classes).
.cache/.spark-classes: $(VENV)/.installed $(JARS_STAMP) plugins/acklab/tools/spark_classes.py
	$(BIN)/python -m acklab.tools.spark_classes
	touch $@

$(AIRFLOW_HOME)/.migrated: $(VENV)/.installed plugins/acklab/services/airflow_pool.py
	mkdir -p $(AIRFLOW_HOME)/plugins
	$(BIN)/airflow db migrate > $(AIRFLOW_HOME)/migrate.log
	$(BIN)/acklab airflow pool
	touch $@

# The DAG once, in-process, on the embedded local cluster with default params.
run: setup
	$(BIN)/acklab check-params kafka_delivery_matrix '$(RUN_CONF)'
	$(BIN)/acklab reap
	ACKLAB_BIND_CLUSTER_TO_PID=1 $(BIN)/airflow dags test kafka_delivery_matrix -c '$(RUN_CONF)' > $(AIRFLOW_HOME)/dags-test.log 2>&1 \
	  || { tail -n 60 $(AIRFLOW_HOME)/dags-test.log; echo "DAG run failed; full log: $(AIRFLOW_HOME)/dags-test.log"; exit 1; }
	grep -oE "(PASS|FAIL|INCOMPLETE) [a-z0-9._-]+ \[.*\)" $(AIRFLOW_HOME)/dags-test.log || true
	$(BIN)/acklab report --require-pass

# Everything but the compose stack (`make test-compose`): unit and integration tests, the DAGs under
# the Airflow stack on PostgreSQL and in Chromium, the audit on a Spark standalone master.
test: setup postgres-deps browser-deps docker-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest tests -q --durations=40 || { status=$$?; head -n 80 $${ACKLAB_TEST_ARTIFACTS:-test-artifacts}/pytest-crash.txt 2>/dev/null; exit $$status; }

# The `slow` family: repeated real-cluster experiments (docs/reference.md "Tests and benchmarks").
.PHONY: test-slow
test-slow: setup docker-deps
	$(BIN)/python -m pytest tests -q -m slow

# The other families outside `make test` (their cheapest slices run in it): every Kafka and client
# version, ten SIGKILLed tasks, the field-notes DAG with every preset.
.PHONY: test-versions test-killed-runs test-field-notes
test-versions: setup
	$(BIN)/python -m pytest tests -q -m versions

test-killed-runs: setup
	$(BIN)/python -m pytest tests -q -m killed_runs

test-field-notes: setup
	$(BIN)/python -m pytest tests -q -m field_notes

test-unit: setup
	$(BIN)/python -m pytest tests/unit -q

# Workload throughput: bare confluent-kafka loop vs the instrumented workload vs Kafka's ProducerPerformance,
# same 3-broker cluster and profile; the last two lines are the ratios. BENCH_ARGS='--profile idempotent --rounds 5'.
bench-load: setup
	$(BIN)/python -m acklab.tools.bench_load $(BENCH_ARGS)

# The Java producer driver (full evidence) vs Kafka's ProducerPerformance on the same kafka-clients and
# properties, one cluster; the last line is `ratio java/kafka-perf: X`. BENCH_ARGS='--client 3.9.1 --rounds 7'.
.PHONY: bench-java
bench-java: setup
	$(BIN)/python -m acklab.tools.bench_java $(BENCH_ARGS)

# Throughput through the fault proxy (no active fault) vs direct, median of alternating rounds.
bench-proxy: setup
	$(BIN)/python -m acklab.tools.bench_proxy

# A pipeline processor (eos) vs a bare consume-produce loop of the same client, both families, one
# cluster; the last lines are `ratio eos/bare <family>: X`. BENCH_ARGS='--messages 200000 --rounds 5'.
.PHONY: bench-processor
bench-processor: setup
	$(BIN)/python -m acklab.tools.bench_processor $(BENCH_ARGS)

# The daily DAG's standard matrix (every profile x every fault) once via `airflow dags test`; prints
# `matrix wall seconds` and `median scenario overhead seconds` last. BENCH_MATRIX_CONF='{"faults": [...]}'.
.PHONY: bench-matrix
bench-matrix: setup
	$(BIN)/acklab reap
	$(BIN)/python -m acklab.tools.bench_matrix --conf '$(or $(BENCH_MATRIX_CONF),{})'

# The cost model of a run in shares: the shares DAG via `airflow dags test` as 1 share, then as 2
# (one after the other on this host); prints each phase, the fixed costs and the projection for N
# workers last. BENCH_SHARES_CONF='{"faults": [...]}' (default: the standard matrix).
.PHONY: bench-shares
bench-shares: setup
	$(BIN)/acklab reap
	$(BIN)/python -m acklab.tools.bench_shares --conf '$(or $(BENCH_SHARES_CONF),{})'

# Importing the DAG files in a fresh interpreter after `import airflow.sdk` (median of 5):
# the last line is `dag parse seconds: X`.
.PHONY: bench-dag-parse
bench-dag-parse: setup
	$(BIN)/python -m acklab.tools.bench_dag_parse

# Spark audit at 5M/10M/20M synthetic messages (one spark-submit each, checked against the planted
# counts) vs the workload's load rate; the last lines are the per-million times and the ratios.
.PHONY: bench-audit
bench-audit: setup
	$(BIN)/python -m acklab.tools.bench_audit $(BENCH_AUDIT_ARGS)

# The Docker backend (docs/reference.md "Docker"): Debian's engine, started with vfs storage, no iptables and no
# default bridge when none answers; the local Kafka image built from host files (cached by a content
# tag); its integration tests (they start and stop an engine themselves when none answers).
.PHONY: docker-deps docker-engine docker-image test-docker
docker-deps:
	command -v dockerd >/dev/null || { apt-get update -qq && apt-get install -y -qq docker.io; }

docker-engine: setup docker-deps
	$(BIN)/acklab docker engine

docker-image: setup
	$(BIN)/acklab docker image --kafka-version $(firstword $(KAFKA_VERSIONS))

test-docker: setup docker-deps
	$(BIN)/python -m pytest tests/integration/test_docker_backend.py -q

# docker-compose.yaml started for real on stand-in images built from Debian's packages (no pull):
# Debian's docker-compose (v1) and mmdebstrap; the test starts an engine when none answers.
.PHONY: compose-deps test-compose
compose-deps: docker-deps
	@missing=""; command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	command -v mmdebstrap >/dev/null || missing="$$missing mmdebstrap"; \
	if [ -n "$$missing" ]; then apt-get update -qq && apt-get install -y -qq $$missing; fi

test-compose: setup compose-deps
	$(BIN)/python -m pytest tests -q -m compose

# The DAGs on CeleryExecutor (docs/reference.md "Scale-out"): Debian's redis-server as the broker,
# PostgreSQL, two Celery workers; the smoke DAG, the reduced matrix in two shares, a killed worker.
.PHONY: celery-deps test-celery
celery-deps:
	@command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server; }

test-celery: setup postgres-deps celery-deps
	$(BIN)/python -m pytest tests -q -m celery --durations=10

# An S3-compatible server for the evidence store's s3:// tests (docs/reference.md "Scale-out"):
# SeaweedFS's `weed`, built from its Go module at a pinned version (Go 1.26 or newer), into .cache/bin.
SEAWEEDFS_VERSION := v0.0.0-20261109003541-7506e5f91cd6
WEED := .cache/bin/weed
.PHONY: s3-deps test-s3
$(WEED):
	@command -v go >/dev/null || { echo "building SeaweedFS needs Go 1.26 or newer (go on PATH); allowed: install Go, then make s3-deps"; exit 2; }
	mkdir -p $(dir $@)
	src=$$(go mod download -json github.com/seaweedfs/seaweedfs@$(SEAWEEDFS_VERSION) | $(PYTHON) -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'); \
	  build=$$(mktemp -d); trap 'rm -rf "$$build"' EXIT; cp -r "$$src/." "$$build" && chmod -R u+w "$$build" \
	  && (cd "$$build" && go build -o $(CURDIR)/$@.partial ./weed) && mv $(CURDIR)/$@.partial $(CURDIR)/$@

s3-deps: $(WEED)

test-s3: setup s3-deps
	$(BIN)/python -m pytest tests -q -m s3 --durations=10

# Debian packages of the deployment tests: PostgreSQL (without the package's own cluster) and Chromium.
.PHONY: postgres-deps browser-deps
postgres-deps:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { mkdir -p /etc/postgresql-common/createcluster.d \
	  && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/acklab.conf \
	  && apt-get update -qq && apt-get install -y -qq postgresql; }

browser-deps:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

# The Airflow stack as teams run it (api-server, scheduler, dag-processor; LocalExecutor) from
# airflow_home, on its SQLite DB or with AIRFLOW_DB=postgres on a project-local PostgreSQL
# (airflow_home/postgres); CELERY_WORKERS=2: CeleryExecutor with a Redis broker and two workers (on
# PostgreSQL); prints the UI's address and login. `make airflow-stop` stops exactly that.
AIRFLOW_PORT ?= 8080
AIRFLOW_DB ?= sqlite
.PHONY: airflow airflow-stop
CELERY_WORKERS ?= 0
airflow: setup $(if $(filter postgres,$(AIRFLOW_DB)),postgres-deps) $(if $(filter-out 0,$(CELERY_WORKERS)),postgres-deps celery-deps)
	$(BIN)/acklab airflow up --port $(AIRFLOW_PORT) $(if $(filter postgres,$(AIRFLOW_DB)),--postgres) --celery-workers $(CELERY_WORKERS)

airflow-stop:
	$(BIN)/acklab airflow down

reap:
	$(BIN)/acklab reap --all

clean: reap
	rm -rf runs $(AIRFLOW_HOME) .cache $(RECORDS_EXT) plugins/acklab/workload/records.c
