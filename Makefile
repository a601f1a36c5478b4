# namesrv-grpc: every target creates its own virtual environment (.venv) on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUF := npx --yes @bufbuild/buf@1.75.0
IMAGE ?= namesrv-grpc:dev
# podman's configuration for this project's targets (written by scripts/install-podman.sh)
CONTAINERS_CONF := $(CURDIR)/build/containers.conf
# Python may cache compiled modules (__pycache__/, ignored by git) even when the environment says
# not to: a NameServer start is three Python processes, and without the cache each one compiles the
# modules it imports from source again (~0.2 CPU-s per process; docs/development.md).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo report analytics-zip test test-tools faketime-tools test-setup test-builds test-compile test-suite test-checks jars test-quick lint deploy-check prometheus-tools java-runtime rocketmq proto proto-check clean bench bench-quick bench-tools remoting-clients podman-tools image image-test clients contract-image

## The virtual environment: a new one is a hard-linked copy of a prepared one in the build cache,
## keyed by pyproject.toml (scripts/install-venv.sh: ~4 s instead of ~50). --no-compile: pip does
## not compile every module of every package (pyspark's thousands among them) where it updates an
## environment; a module is compiled when first imported, into __pycache__/ (above).
$(STAMP): pyproject.toml scripts/install-venv.sh
	bash scripts/install-venv.sh $(VENV) $(PYTHON)
	touch $(STAMP)

## demo: NameServer + three broker agents from examples/, print TopicTest's route, stop the slave
demo: $(STAMP)
	$(PY) scripts/demo.py

## test: the whole check, in two phases. First the set-up (test-setup, TEST_JOBS jobs at once): the
## virtual environment beside the system packages the checks need (prometheus, podman, a Java
## runtime, libfaketime; one at a time, apt-get takes one lock), then, once those are in, what the
## suite runs against: the RocketMQ jars and the example clients (one after the other: both use
## Maven's local repository) beside the ali-ons client. Then two jobs at once: test-checks (lint:
## ruff, mypy, buf lint and buf breaking; the Prometheus config and alert checks; the container
## image built and run (image-test), one after the other) and test-suite: the suite's modules
## compiled (test-compile), then the suite on TEST_WORKERS pytest-xdist workers (--dist loadgroup:
## tests/conftest.py keeps the tests of one shared server, JVM or Spark session on one worker).
## docs/development.md says what each choice measured.
## NAMESRV_REQUIRE_PROMETHEUS=1 / NAMESRV_REQUIRE_NODE=1: the tests that need the prometheus
## binary or the ali-ons remoting client fail instead of skipping;
## NAMESRV_REQUIRE_ROCKETMQ=1: so do the tests against the real RocketMQ jars of `make rocketmq`;
## NAMESRV_REQUIRE_CLIENTS=1: and the tests of the example clients of `make clients`.
test:
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-setup
	$(MAKE) --no-print-directory -j2 test-checks test-suite

TEST_JOBS ?= 4
TEST_WORKERS ?= 3
PYTEST_ARGS ?=
TEST_CHECKS_LOG ?= build/test-checks.log
# mypy's cache in the build cache, shared by every clone: mypy checks each cached module's hash, so
# a fresh clone rechecks only what differs (26 -> 1 CPU-s for an unchanged tree)
BUILD_CACHE ?= $(or $(NAMESRV_BUILD_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/namesrv-grpc)
MYPY_CACHE ?= $(BUILD_CACHE)/mypy

## test-setup: the virtual environment beside test-builds (run with -j)
test-setup: $(STAMP) test-builds

## test-tools: the system packages of `make test`, one after the other (apt-get takes one lock)
test-tools:
	$(MAKE) --no-print-directory -j1 prometheus-tools podman-tools java-runtime faketime-tools

## test-builds: once test-tools is done, what the suite runs against (run with -j)
test-builds: test-tools
	$(MAKE) --no-print-directory remoting-clients jars

## test-compile: the suite collected once (--collect-only), so that the modules it imports are
## compiled into __pycache__/ before the suite's workers start; otherwise each of the
## TEST_WORKERS workers compiles them at once, from source (~16 CPU-s more each; docs/development.md)
test-compile: $(STAMP)
	@mkdir -p build
	@$(PY) -m pytest --collect-only -q -p no:cacheprovider >build/test-compile.log 2>&1 \
		&& echo "test-compile: $$(tail -n 1 build/test-compile.log)" \
		|| { cat build/test-compile.log; echo "test-compile: the suite does not collect (above)"; exit 1; }

## test-suite: the test suite alone, its modules compiled first (needs what test-setup installs)
test-suite: $(STAMP) test-compile
	NAMESRV_REQUIRE_PROMETHEUS=1 NAMESRV_REQUIRE_NODE=1 NAMESRV_REQUIRE_ROCKETMQ=1 NAMESRV_REQUIRE_CLIENTS=1 \
		$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=10 $(PYTEST_ARGS)

## test-checks: lint, deploy-check and image-test one after the other, their output in
## build/test-checks.log (printed when one fails), so that the suite's output beside them stays readable
test-checks: $(STAMP)
	@mkdir -p $(dir $(TEST_CHECKS_LOG))
	@echo "test-checks: lint, deploy-check, image-test (output: $(TEST_CHECKS_LOG))"
	@$(MAKE) --no-print-directory -j1 lint deploy-check image-test >$(TEST_CHECKS_LOG) 2>&1 \
		&& echo "test-checks: lint, deploy-check, image-test passed" \
		|| { cat $(TEST_CHECKS_LOG); echo "test-checks: FAILED (output above and in $(TEST_CHECKS_LOG))"; exit 1; }

## jars: the RocketMQ jars, then the example clients (never side by side: one Maven local repository)
jars:
	$(MAKE) --no-print-directory rocketmq
	$(MAKE) --no-print-directory clients

## test-quick: the inner loop: the suite without the slow tests (real RocketMQ JVMs, Spark, the
## end-to-end runs) on every core; needs only the virtual environment. Seconds to a few minutes.
test-quick: $(STAMP)
	$(PY) -m pytest -q -n $(QUICK_WORKERS) --dist loadgroup -m "not slow and not spark" $(PYTEST_ARGS)

QUICK_WORKERS ?= 2

## report: a short demo cluster exports route snapshots; the Spark topic distribution job reports on them
report: $(STAMP) java-runtime
	$(PY) scripts/report.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src analytics tests scripts bench
	$(VENV)/bin/ruff format --check src analytics tests scripts bench
	MYPY_CACHE_DIR=$(MYPY_CACHE) $(VENV)/bin/mypy
	$(BUF) lint protos
	$(BUF) breaking protos --against protos/contract.binpb

## prometheus-tools: prometheus and promtool from Debian's package, when missing
prometheus-tools:
	bash scripts/install-prometheus.sh

## analytics-zip: the Spark jobs as build/analytics.zip, for spark-submit --py-files on a cluster
analytics-zip: $(STAMP)
	$(PY) scripts/analytics_zip.py build/analytics.zip

## clients: the example clients of examples/clients/ (Go, Java, TypeScript): pinned code generators,
## buf generate (buf.gen.yaml), go build, mvn package, tsc (scripts/install-clients.sh)
clients:
	bash scripts/install-clients.sh

## contract-image: replace protos/contract.binpb, the image `buf breaking` compares protos/ with.
## Only on purpose, for a change users were told about: add a line to CHANGELOG.md with the new
## image's sha256 (tests/test_contract.py checks that it is there)
contract-image:
	$(BUF) build protos --exclude-source-info -o protos/contract.binpb
	sha256sum protos/contract.binpb

## remoting-clients: npm ali-ons (an independent RocketMQ remoting client) in build/node, for the tests
remoting-clients:
	bash scripts/install-ali-ons.sh

## rocketmq: the pinned Apache RocketMQ jars (5.5.0, 4.9.7, rocketmq-client-java 5.0.8; poms in
## tests/rocketmq/) in build/rocketmq/<version>/lib, for the tests against the real thing and bench
rocketmq:
	bash scripts/install-rocketmq.sh

## faketime-tools: libfaketime from Debian's package, when missing (the test of a wall-clock step)
faketime-tools:
	bash scripts/install-faketime.sh

## java-runtime: a Java 17 runtime for PySpark (Debian's openjdk-17-jre-headless), when java is missing
java-runtime:
	bash scripts/install-java.sh

## deploy-check: promtool checks of deploy/prometheus: both configs, the alert rules, their unit tests
deploy-check: prometheus-tools
	promtool check config deploy/prometheus/prometheus.yml
	promtool check config deploy/prometheus/prometheus-kubernetes.yml
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml

## bench: every benchmark scenario at full size, 3 runs each; writes docs/benchmarks.md and bench/results/full.json
bench: $(STAMP) bench-tools rocketmq
	$(PY) -m bench.run

## bench-quick: the same scenarios, smaller and shorter (under 3 minutes), for development
bench-quick: $(STAMP) bench-tools rocketmq
	$(PY) -m bench.run --quick

## bench-tools: h2load (Debian nghttp2-client) and etcd (Debian etcd-server), when missing
bench-tools:
	bash scripts/install-bench-tools.sh

## podman-tools: podman, runc, debootstrap from Debian's packages when missing; build/containers.conf
podman-tools:
	bash scripts/install-podman.sh $(CONTAINERS_CONF)

## image: the container image namesrv-grpc:dev (deploy/Dockerfile) with podman, from a local Debian
## base (debootstrap) and a wheelhouse (build/); both are reused by the next build
image: $(STAMP) podman-tools
	CONTAINERS_CONF=$(CONTAINERS_CONF) IMAGE=$(IMAGE) bash scripts/build-image.sh $(PY)

## image-test: run the image (NameServer + broker agent, route, SIGTERM), docker-compose.yml
## (podman-compose) and kubernetes/namesrv.yaml (podman kube play)
image-test: image
	CONTAINERS_CONF=$(CONTAINERS_CONF) $(PY) scripts/image_test.py --image $(IMAGE)

## proto: regenerate src/namesrv/v1 from protos/ (commit the result)
proto: $(STAMP)
	$(PY) scripts/gen_protos.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
