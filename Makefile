# agentq — `make demo` runs the whole story on an embedded Redis; `make test`
# runs every test, starting real redis-server processes on free ports.
GO        ?= go
GOFLAGS   ?=
PKGS      := ./...
TEST_TIMEOUT ?= 20m

.PHONY: all build bench-peers test classifier-report classifier-model test-topology test-clients unit demo bench fuzz vet fmt clean redis chromium node clients

all: build

# The git commit each binary reports (`--version`, agentq_build_info), also
# where Go does not stamp it (GOFLAGS=-buildvcs=false, a copy without .git).
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null)

build:
	$(GO) build -ldflags "-X github.com/agentq/agentq/internal/buildinfo.revision=$(REVISION)" -o bin/ ./cmd/...

redis:
	@./scripts/ensure-redis.sh

## chromium: headless Chromium for the console's browser test (internal/console/browser_test.go)
chromium:
	@./scripts/ensure-chromium.sh

## node: Node.js >= 18 and npm for the TypeScript client
node:
	@./scripts/ensure-node.sh

## clients: the TypeScript client's dev dependency (npm ci, only when the lock file changed) and its build (dist/)
clients: node
	@cd clients/typescript && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; } && npm run --silent build

## test-clients: the Python and TypeScript clients' unit suites (fake servers, real agent subprocesses),
## then both packages built, installed as a team installs them and imported (scripts/test-packages.sh: npm pack,
## npm install of the tarball and of the path, pip wheel and sdist into a venv);
## their live suites run against a real serve, worker and redis-server in e2e (TestClientsPython, TestClientsTypeScript)
test-clients: clients
	python3 -m unittest discover -s clients/python/tests -p 'test_unit.py'
	cd clients/typescript && node --test test/unit.test.mjs > .unit.out 2>&1 || { cat .unit.out; rm -f .unit.out; exit 1; }; \
	grep -E '^# (tests|pass|fail)' .unit.out; rm -f .unit.out
	@./scripts/test-packages.sh

## test: unit + integration tests (with -race) against real redis-server processes the tests start themselves
## (the clients' suites included), then the topology suite (Sentinel failover, Cluster) with its counts printed
test: redis chromium test-clients
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestTopology' $(PKGS)
	@$(MAKE) --no-print-directory classifier-report
	@$(MAKE) --no-print-directory test-topology

## classifier-report: the classifier's figures on families it has not met (printed, not asserted):
## leave-one-family-out over the sourced corpus, each round's first contact, each corpus file;
## and the check that classifier_model.txt is what the corpus trains (no race detector: CPU-bound training)
classifier-report:
	@$(GO) test -count=1 -v -run '^(TestModelFileIsCurrent|TestClassifierGeneralization|TestClassifyRealErrorCorpus)$$' ./resilience/ > .classifier.out 2>&1; rc=$$?; \
	if [ $$rc -eq 0 ]; then grep -E 'classifier (generalization|first contact)|records, exact|exact class' .classifier.out | sed 's/^ *[a-z_]*\.go:[0-9]*: //'; else cat .classifier.out; fi; \
	rm -f .classifier.out; exit $$rc

## classifier-model: retrain resilience/classifier_model.txt from the sourced corpus (resilience/testdata)
classifier-model:
	$(GO) test -count=1 -run '^TestModelFileIsCurrent$$' ./resilience/ -update-model

## test-topology: agentq on a real Sentinel group and a real 6-node Cluster (masters SIGKILLed under load)
test-topology: redis
	@{ $(GO) test -race -count=1 -timeout 10m -v -run '^TestTopology' ./e2e/ > .topology.out 2>&1; echo $$? > .topology.rc; }; \
	rc=$$(cat .topology.rc); rm -f .topology.rc; \
	if [ "$$rc" -eq 0 ]; then grep -E '^(=== RUN|--- |    --- |PASS|FAIL|ok)|topology_test.go:[0-9]+: topology ' .topology.out; else cat .topology.out; fi; \
	rm -f .topology.out; exit $$rc

## unit: the fast tests only (no multi-process or end-to-end suites)
unit:
	$(GO) test -race -short -count=1 $(PKGS)

## demo: the main job on an embedded, NOT durable, in-memory Redis (miniredis); no set-up
demo:
	$(GO) run ./cmd/demo

## bench-peers: agentq side by side with plain asynq, BullMQ (Node) and River (PostgreSQL) on this machine
## (bench/peers/run.sh: installs what is missing, starts its own redis-server, postgres and fake LLM on
## loopback, stops them after; about 30 min). SCALE=0.1 ROUNDS=1 for a quick check; SYSTEMS=, SCENARIOS= to narrow.
bench-peers:
	@SCALE="$(SCALE)" ROUNDS="$(ROUNDS)" SYSTEMS="$(SYSTEMS)" SCENARIOS="$(SCENARIOS)" ./bench/peers/run.sh

## bench: benchmarks with ratios against plain asynq measured in the same run; ends with the headline
## lines, in this order. BENCH=<regexp> runs a subset, e.g. the Redis-cost ones:
## make bench BENCH='IdleCost|PickupLatency|Enqueue|Throughput' (Throughput matches ThroughputProcs too)
bench: redis
	@{ $(GO) test -run '^$$' -bench '$(or $(BENCH),.)' -benchtime 1x -timeout 30m ./bench/... ./resilience/ 2>&1; echo $$? > .bench.rc; } | tee .bench.out; rc=$$(cat .bench.rc); rm -f .bench.rc; \
	for h in 'wait notification p50' 'breaker Redis CPU per recorded call' 'limiter Redis CPU per admitted call' 'cluster pipeline/asynq throughput ratio' 'idle Redis CPU per worker' \
		'single enqueue/asynq ratio' 'pipeline/asynq 4-process throughput ratio' 'pipeline/asynq Redis CPU per task ratio' 'pipeline/asynq throughput ratio' \
		'io-bound 50ms/c=200 agentq/asynq throughput ratio' 'io-bound 200ms/c=400 agentq/asynq throughput ratio' 'worker CPU per task agentq/asynq ratio' \
		'waiting tasks idle-fleet Redis CPU with/without ratio' 'signal resume latency p50' \
		'1000-child fan-out children/s' 'classifier cost per failure model/tables ratio'; do \
		grep -h "^$$h: " .bench.out | tail -n 1; \
	done; exit $$rc

## fuzz: a short run of each fuzz target (20s each)
fuzz:
	for f in FuzzDecode FuzzDecodeFast FuzzEnvelopeMarshal; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime 20s ./tasks/ || exit 1; \
	done
	$(GO) test -run '^$$' -fuzz '^FuzzEventMarshal$$' -fuzztime 20s ./internal/record/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 20s ./config/
	$(GO) test -run '^$$' -fuzz '^FuzzClassify$$' -fuzztime 20s ./resilience/

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -l -w .

clean:
	rm -rf bin .bench.out .topology.out clients/typescript/dist
