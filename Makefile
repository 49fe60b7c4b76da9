# durable-llm — every LLM call is a Temporal workflow.
#
#   make run    start a dev server, llmsim, the worker; print how to ask
#   make test   unit, workflow, integration and replay tests
#   make lint   gofmt, go vet, workflowcheck
#   make bench  storm, overhead and memory benchmarks

SHELL := /bin/bash
GO ?= go
TEMPORAL_VERSION := v1.5.1
BIN := $(CURDIR)/bin
TEMPORAL := $(BIN)/temporal
export TEMPORAL_CLI := $(TEMPORAL)

.PHONY: run test test-short lint bench temporal llmsim histories tidy screenshot

## temporal: build the pinned Temporal CLI (dev server + Web UI) into ./bin
temporal: $(TEMPORAL)
$(TEMPORAL):
	@mkdir -p $(BIN)
	@echo "building Temporal CLI $(TEMPORAL_VERSION) into ./bin (first time: a few minutes)…"
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

## run: the whole thing on this machine (Ctrl-C stops it)
run: $(TEMPORAL)
	@$(GO) build -o $(BIN)/devstack ./devstack
	@exec $(BIN)/devstack

## test: everything a change must pass
test: $(TEMPORAL) lint
	$(GO) test -count=1 -timeout 30m ./...

## test-short: unit tests only (no dev server)
test-short:
	$(GO) test -short -count=1 ./...

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool workflowcheck ./workflows/... ./workflowstreams/...

## screenshot: re-take docs/ui-attempts.png and docs/ui-calls.png, the README's Web UI pictures (needs Chromium)
screenshot: $(TEMPORAL)
	$(GO) test -count=1 -run TestWebUI ./internal/uicheck -update

## histories: re-record the golden histories the replay tests replay (real runs on a dev server)
histories: $(TEMPORAL)
	$(GO) run ./internal/histories/cmd/record-histories -out workflows/testdata/histories $(if $(ONLY),-only $(ONLY))

## bench: storm, overhead and memory benchmarks (prints tables, writes charts);
##        BENCH_FLAGS="-bench storm -storm spike" runs one, "-short" a smoke run
bench: $(TEMPORAL)
	$(GO) run ./bench/cmd/bench $(BENCH_FLAGS)

## llmsim: the OpenAI-compatible failure simulator on :8000
llmsim:
	$(GO) run ./llmsim/cmd/llmsim --addr 127.0.0.1:8000 $(if $(SCENARIO),--scenario $(SCENARIO))

tidy:
	$(GO) mod tidy
