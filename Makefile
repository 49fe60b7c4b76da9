# durable-llm — every LLM call is a Temporal workflow.
#
#   make run    start a dev server, llmsim, the worker; print how to ask
#   make test   unit, workflow, integration and replay tests
#   make lint   gofmt, go vet, workflowcheck
#   make bench  storm, overhead and memory benchmarks
#   make cluster  the production topology: Temporal on PostgreSQL, 3 workers, 2 front doors

SHELL := /bin/bash
GO ?= go
TEMPORAL_VERSION := v1.5.1
BIN := $(CURDIR)/bin
TEMPORAL := $(BIN)/temporal
# Temporal's server, its SQL tool and its Web UI server for make cluster,
# built from the Go module proxy: the versions inside the CLI above.
TEMPORAL_SERVER_VERSION := v1.29.1
UI_SERVER_VERSION := v2.42.1
CLUSTER_BINS := $(BIN)/temporal-server $(BIN)/temporal-sql-tool $(BIN)/temporal-ui-server
export TEMPORAL_CLI := $(TEMPORAL)
# A real OpenAI-compatible LLM server for testkit/realllm's tests, built from
# the Go module proxy (its module zip lacks llama.cpp's vendored headers: see make ollama).
OLLAMA_VERSION := v0.17.4
OLLAMA := $(BIN)/ollama
export DURABLE_LLM_OLLAMA := $(OLLAMA)

.PHONY: run test test-short lint bench temporal ollama ollama-if-able cluster cluster-bin llmsim histories tidy screenshot faq-eval

## temporal: build the pinned Temporal CLI (dev server + Web UI) into ./bin
temporal: $(TEMPORAL)
$(TEMPORAL):
	@mkdir -p $(BIN)
	@echo "building Temporal CLI $(TEMPORAL_VERSION) into ./bin (first time: a few minutes)…"
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

## ollama: build Ollama $(OLLAMA_VERSION) into ./bin, the real LLM server of the tests (first time:
##         about 5 min on 2 cores). The module zip has no vendor/ directories, so three of
##         llama.cpp's headers come from elsewhere: nlohmann/json (Debian nlohmann-json3-dev),
##         stb/stb_image.h (Debian libstb-dev) and a stub miniaudio/miniaudio.h (audio input off).
ollama: $(OLLAMA)
$(OLLAMA):
	@test -f /usr/include/nlohmann/json_fwd.hpp -a -f /usr/include/stb/stb_image.h || \
	  { echo "make ollama needs Debian's nlohmann-json3-dev and libstb-dev (apt-get install nlohmann-json3-dev libstb-dev)"; exit 1; }
	@mkdir -p $(BIN)
	@echo "building Ollama $(OLLAMA_VERSION) into ./bin (first time: about 5 minutes)…"
	CGO_ENABLED=1 CGO_CPPFLAGS="-I$(CURDIR)/testkit/realllm/testdata/include" GOBIN=$(BIN) \
	  nice -n 10 $(GO) install -ldflags "-X github.com/ollama/ollama/version.Version=$(OLLAMA_VERSION:v%=%)" \
	  github.com/ollama/ollama@$(OLLAMA_VERSION)

# ollama-if-able builds Ollama for make test where its C++ headers are
# installed; elsewhere (a machine with only Go) testkit/realllm's test skips
# and says so. .ci/run installs them and requires the test
# (DURABLE_LLM_REQUIRE_REALLLM=1).
ollama-if-able:
	@if [ -x $(OLLAMA) ] || { [ -f /usr/include/nlohmann/json_fwd.hpp ] && [ -f /usr/include/stb/stb_image.h ] && command -v g++ >/dev/null; }; then \
	  $(MAKE) --no-print-directory ollama; \
	else echo "note: no Ollama build here (apt-get install g++ nlohmann-json3-dev libstb-dev, then make ollama): the real LLM server test skips"; fi

## cluster-bin: build Temporal's server, SQL tool and Web UI server into ./bin (first time: a few minutes)
cluster-bin: $(CLUSTER_BINS)
$(BIN)/temporal-server:
	@mkdir -p $(BIN)/.gobin-server
	@echo "building Temporal server $(TEMPORAL_SERVER_VERSION) into ./bin (first time: a few minutes)…"
	GOBIN=$(BIN)/.gobin-server $(GO) install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION)
	mv $(BIN)/.gobin-server/server $@
$(BIN)/temporal-sql-tool:
	@mkdir -p $(BIN)/.gobin-sql
	GOBIN=$(BIN)/.gobin-sql $(GO) install go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION)
	mv $(BIN)/.gobin-sql/sql $@
$(BIN)/temporal-ui-server:
	@mkdir -p $(BIN)/.gobin-ui
	GOBIN=$(BIN)/.gobin-ui $(GO) install github.com/temporalio/ui-server/v2/cmd/server@$(UI_SERVER_VERSION)
	mv $(BIN)/.gobin-ui/server $@

## cluster: Temporal's server on PostgreSQL, its Web UI, llmsim, 3 workers
##          and 2 front doors, each its own process (Ctrl-C stops them; state in .cluster)
cluster: $(CLUSTER_BINS)
	@$(GO) build -o $(BIN)/cluster ./cluster
	@exec $(BIN)/cluster

## run: the whole thing on this machine (Ctrl-C stops it)
run: $(TEMPORAL)
	@$(GO) build -o $(BIN)/devstack ./devstack
	@exec $(BIN)/devstack

## test: everything a change must pass
test: $(TEMPORAL) ollama-if-able $(CLUSTER_BINS) lint
	$(GO) test -count=1 -timeout 30m ./...

## test-short: unit tests only (no dev server)
test-short:
	$(GO) test -short -count=1 ./...

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool workflowcheck ./workflows/... ./workflowstreams/... ./llmworkflow/... ./examples/agent/...

## screenshot: re-take docs/ui-attempts.png and docs/ui-calls.png, the README's Web UI pictures (needs Chromium)
screenshot: $(TEMPORAL)
	$(GO) test -count=1 -run TestWebUI ./testkit/uicheck -update

## histories: re-record the golden histories the replay tests replay (real runs on a dev server)
histories: $(TEMPORAL)
	$(GO) run ./testkit/histories/cmd/record-histories -out workflows/testdata/histories $(if $(ONLY),-only $(ONLY))

## bench: storm, overhead and memory benchmarks (prints tables, writes charts);
##        BENCH_FLAGS="-bench storm -storm spike" runs one, "-short" a smoke run
bench: $(TEMPORAL)
	$(GO) run ./bench/cmd/bench $(BENCH_FLAGS)

## faq-eval: how well the FAQ answers the evaluation set (policies/faq/testdata/eval.yaml; recall,
##           wrong answers, out-of-scope answers per language, tune and held-out splits) and the
##           latency of one match on a 500-entry knowledge base; FAQ_EVAL_FLAGS="-errors" lists the
##           tune split's errors
faq-eval:
	$(GO) run ./policies/faq/cmd/faqeval $(FAQ_EVAL_FLAGS)

## llmsim: the OpenAI-compatible failure simulator on :8000
llmsim:
	$(GO) run ./llmsim/cmd/llmsim --addr 127.0.0.1:8000 $(if $(SCENARIO),--scenario $(SCENARIO))

tidy:
	$(GO) mod tidy
