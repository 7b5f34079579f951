# Zest — the front door. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# Pinned tool versions, installed into .bin/ (git-ignored) by `make tools`.
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GRPC_GATEWAY_VERSION := v2.33.0
GOLANGCI_LINT_VERSION := v2.15.0
BIN := $(CURDIR)/.bin
BUF := $(CURDIR)/scripts/tools/node_modules/@bufbuild/buf-linux-x64/bin/buf

# The Go modules: the product at the root (services, lib, proto, bench, docs, e2e), zestctl
# (cli/, so cobra stays out of the services) and deploy/ (the manifests' validators: compose-go,
# kustomize, the Kubernetes types). scripts/etcd, a fourth, is built by `make etcd` alone.
# docs/decisions.md, "One module for the product"; deploy/boundaries_test.go holds the lines.
MODULES := . cli deploy
SERVICES := gateway/cmd/zest-gateway services/inference/cmd/zest-inference \
	services/mcpgateway/cmd/zest-mcpgateway services/toolhost/cmd/zest-toolhost

# The version stamped into every binary (-version prints it) and image tag: git's description
# of the checkout, "dev" outside git.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO_LDFLAGS := -X github.com/zestmcp/zest/lib/service.Version=$(VERSION)

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  \033[36m%-16s\033[0m %s\n",$$1,$$2}'

.PHONY: build
build: ## Build the four service binaries and zestctl into bin/
	@mkdir -p bin
	@for s in $(SERVICES); do go build -ldflags "$(GO_LDFLAGS)" -o bin/ ./$$s; done
	@go -C cli build -ldflags "$(GO_LDFLAGS)" -o $(CURDIR)/bin/ ./cmd/zestctl
	@ls bin

# Images: one per service from deploy/Dockerfile's targets, tagged $(IMAGE_PREFIX)<target>:$(VERSION)
# (the names deploy/compose.yaml uses with ZEST_VERSION=$(VERSION), and deploy/k8s/base's images).
# IMAGES_FLAGS go to docker buildx build (default --load; e.g. --push --platform linux/amd64,linux/arm64).
IMAGE_PREFIX ?= zest-
IMAGE_TARGETS := gateway mcpgateway inference toolhost
IMAGES_FLAGS ?= --load

.PHONY: images
images: ## Build the four container images with docker buildx, versions stamped from git (VERSION, IMAGE_PREFIX, IMAGES_FLAGS)
	@if ! command -v docker >/dev/null 2>&1 || ! docker buildx version >/dev/null 2>&1; then \
	  echo "make images: needs docker with the buildx plugin ('docker buildx version' failed): install Docker Engine and its buildx plugin (Debian: apt-get install docker-buildx), then run make images again" >&2; exit 1; fi
	@for t in $(IMAGE_TARGETS); do \
	  echo "== $(IMAGE_PREFIX)$$t:$(VERSION)"; \
	  docker buildx build $(IMAGES_FLAGS) -f deploy/Dockerfile --target $$t --build-arg VERSION=$(VERSION) -t $(IMAGE_PREFIX)$$t:$(VERSION) . ; \
	done

.PHONY: run
run: build peers bubblewrap ## Build and run the whole suite on loopback (Ctrl-C stops it; peers for the README's examples)
	@scripts/run.sh

.PHONY: test
test: chromium check-generate lint breaking unit e2e ## Run every test (generated-code check, buf lint, buf breaking, go vet, golangci-lint, gofmt, unit, end-to-end with a real browser)

# A test that needs an optional dependency (etcd, the npm peers, node, Chromium, bubblewrap,
# Prometheus, root) says so with lib/testenv's Need, which skips it without one; the test
# targets install them all and set ZEST_REQUIRE_ALL=1, so a missing one fails instead
# (docs/dev/testing.md). Tests that run a real etcd cluster get the binary `make etcd` builds.
ETCD := $(BIN)/etcd
TEST_ENV := ZEST_ETCD_BIN=$(ETCD) ZEST_REQUIRE_ALL=1

.PHONY: unit
unit: peers etcd bubblewrap ## Unit tests of every module (all but e2e/, which make e2e runs on the built binaries)
	@for m in $(MODULES); do $(TEST_ENV) go -C $$m test -race -count=1 $$(go -C $$m list ./... | grep -v '^github.com/zestmcp/zest/e2e\(/\|$$\)'); done

# AREA runs the end-to-end tests of one area only: those of e2e/<AREA>_*_test.go (mcp, admin,
# console, edge, inference, cluster, security, ops, suite; e2e/suite_test.go lists them).
AREA ?=
# E2E_TIMEOUT bounds the whole e2e package (go test's default is 10 minutes). Its ~300 tests
# take ~5 minutes on a quiet 2-core machine and over 10 on a loaded one (stress run of
# 2026-12-05 with other suites building: 97 tests in 10 minutes, none stuck); each test bounds
# its own waits, so this only stops a run that hangs.
E2E_TIMEOUT ?= 40m

E2E_RUN = $(if $(AREA),-run '^($(shell grep -ho '^func Test[A-Za-z0-9_]*' e2e/$(AREA)_*_test.go 2>/dev/null | grep -v '^func TestMain$$' | sed 's/^func //' | paste -sd'|' -))$$')

.PHONY: e2e
e2e: chromium prometheus bubblewrap build peers browser-deps etcd ## End-to-end test: the four built binaries as separate processes, the web console in headless Chromium, Prometheus scraping the four services (AREA=cluster: one area)
	@if [ -n "$(AREA)" ] && ! ls e2e/$(AREA)_*_test.go >/dev/null 2>&1; then echo "make e2e: no e2e/$(AREA)_*_test.go: AREA is one of $$(ls e2e/*_test.go | sed 's|e2e/||; s|_.*||' | sort -u | paste -sd' ' -)" >&2; exit 1; fi
	@cd e2e && ZEST_BIN_DIR=$(CURDIR)/bin $(TEST_ENV) go test -count=1 -timeout $(E2E_TIMEOUT) -v $(E2E_RUN) ./...

# make test RUNS times in a row (default 3) on a fresh clone of HEAD while BUSY busy loops
# (default 2) hold the CPUs: scripts/stress-test.sh, docs/dev/testing.md. On a shared machine:
# nice make stress-test.
.PHONY: stress-test
stress-test: ## Run make test 3 times on a fresh clone of HEAD with 2 busy loops holding the CPUs (RUNS, BUSY; logs in .cache/stress)
	@scripts/stress-test.sh

# The chaos test alone, CHAOS_RUNS times in a row (make e2e runs it once): 3 etcd members, 2 of
# every service on loopback, one process of each kind SIGKILLed in turn under load.
CHAOS_RUNS ?= 5

.PHONY: chaos
chaos: build peers etcd ## Run the chaos test (e2e TestChaos) CHAOS_RUNS times in a row (default 5), its figures in the log
	@cd e2e && ZEST_BIN_DIR=$(CURDIR)/bin $(TEST_ENV) go test -count=$(CHAOS_RUNS) -failfast -v -run '^TestChaos$$' ./...

# etcd's server, built from scripts/etcd: a module of its own (so etcd's server and its
# dependencies stay out of the product's go.mod and go.sum) that pins go.etcd.io/etcd/server/v3; `go install
# …@version` refuses etcd's module for its replace directives. Built again only when missing
# or older than the module's files.
.PHONY: etcd
etcd: $(ETCD) ## Build etcd (pinned in scripts/etcd/go.mod) into .bin/ for the tests that run a real cluster

$(ETCD): scripts/etcd/go.mod scripts/etcd/go.sum scripts/etcd/main.go
	@mkdir -p $(BIN)
	@cd scripts/etcd && GOWORK=off go build -o $@ .
	@touch $@

# Fuzzing: `make fuzz` runs every fuzz target for FUZZTIME each; FUZZFLAGS adds go test flags
# (e.g. FUZZFLAGS=-parallel=1 on a shared machine). Minimizing a new input may take 10 s at
# most (Go's default, 60 s, can stall a short run's workers). `make unit` already runs the
# seed corpora (f.Add and testdata/fuzz/<Name>/) as ordinary tests.
FUZZTIME ?= 30s
FUZZFLAGS ?=

.PHONY: fuzz
fuzz: ## Run every fuzz target of every module for FUZZTIME each (default 30s), one after another
	@for m in $(MODULES); do \
		dirs=$$(cd $$m && grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . | xargs -r -n1 dirname | sort -u || true); \
		for d in $$dirs; do \
			list=$$(cd $$m && go test -list '^Fuzz' $$d); \
			for name in $$(grep '^Fuzz' <<<"$$list" || true); do \
				echo "== $$m/$${d#./} $$name for $(FUZZTIME)"; \
				(cd $$m && go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s $(FUZZFLAGS) $$d); \
			done; \
		done; \
	done

.PHONY: vet
vet: ## go vet every module
	@for m in $(MODULES); do go -C $$m vet ./...; done

.PHONY: tools
tools: $(BUF) $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-grpc-gateway ## Install pinned buf and protoc plugins

$(BUF): scripts/tools/package.json scripts/tools/package-lock.json
	@cd scripts/tools && npm ci --no-audit --no-fund --silent
	@touch $@

$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/protoc-gen-grpc-gateway:
	GOBIN=$(BIN) go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)

.PHONY: generate
generate: tools ## Regenerate Go code from proto/
	@$(BUF) format -w --exclude-path proto/google
	@$(BUF) generate

.PHONY: check-generate
check-generate: generate ## Fail when the committed generated code or proto formatting is stale
	@git diff --exit-code -- proto buf.gen.yaml || { echo "generated code is stale: run 'make generate' and commit" >&2; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- proto); [ -z "$$untracked" ] || { echo "untracked generated files: $$untracked" >&2; exit 1; }

.PHONY: lint-proto
lint-proto: tools ## buf lint
	@$(BUF) lint

# The contracts' compatibility: always against the committed image proto/baseline.binpb, and
# against the previous commit when the clone has it (a shallow clone has none). A deliberate
# breaking change refreshes the image in the same commit (make proto-baseline); that commit is
# then checked against the new image only.
BASELINE := proto/baseline.binpb
.PHONY: breaking
breaking: tools ## buf breaking (WIRE_JSON) against the committed baseline image and the previous commit
	@if ! git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then \
	  echo "buf breaking: this clone has no previous commit; checking the baseline image only"; \
	elif ! git diff --quiet HEAD~1 -- $(BASELINE); then \
	  echo "buf breaking: $(BASELINE) was refreshed since HEAD~1 (a deliberate break); checking the image only"; \
	else echo "buf breaking against HEAD~1"; $(BUF) breaking --against '.git#ref=HEAD~1'; fi
	@echo "buf breaking against $(BASELINE)"; $(BUF) breaking --against $(BASELINE)

.PHONY: proto-baseline
proto-baseline: tools ## Refresh proto/baseline.binpb after a deliberate breaking change of a contract
	@$(BUF) build --exclude-source-info -o $(BASELINE)

# golangci-lint, pinned, from the Go module proxy (GitHub's release downloads are not
# reachable everywhere we build); its linters and why each is on or off: .golangci.yml.
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(BIN)/golangci-lint $@

.PHONY: golangci-lint
# --allow-parallel-runners: golangci-lint refuses to start while another of its runs holds its
# lock, and another checkout's make test (another suite on the same machine) may be linting.
golangci-lint: $(GOLANGCI_LINT) ## golangci-lint (pinned, installed into .bin/) on every module, linters in .golangci.yml
	@for m in $(MODULES); do (cd $$m && $(GOLANGCI_LINT) run --allow-parallel-runners --config $(CURDIR)/.golangci.yml ./...); done

.PHONY: lint
lint: lint-proto vet golangci-lint ## buf lint, go vet, golangci-lint (.golangci.yml) and gofmt
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.'); exit 1; }

.PHONY: clean
clean: ## Remove build output (keeps data/)
	rm -rf bin

PEERS := scripts/peers/node_modules/.package-lock.json
$(PEERS): scripts/peers/package.json scripts/peers/package-lock.json
	@cd scripts/peers && npm ci --no-audit --no-fund --ignore-scripts --silent
	@touch $@

.PHONY: peers
peers: $(PEERS) ## Install the npm MCP peers (servers, SDK, conformance) from the lockfile

.PHONY: tool-catalog
tool-catalog: peers ## Harvest bench/testdata/tool-catalog.json (the tool-search benchmark's catalog) from the real npm MCP servers of scripts/peers/harvest (~1.5 GB installed there; make test needs none of it)
	@cd scripts/peers/harvest && npm ci --no-audit --no-fund --ignore-scripts --silent
	@scripts/peers/node_modules/.bin/node scripts/peers/harvest-tools.mjs

# The browser tests' npm side, pinned: axe-core (its axe.min.js is injected into the page under
# test), the MCP TypeScript SDK v2 client and esbuild, which bundles the client for a page.
# --ignore-scripts: none of them needs an install script (esbuild's binary comes as
# @esbuild/linux-x64, an optional dependency that npm installs without one).
BROWSER_DEPS := scripts/browser/node_modules/.package-lock.json
$(BROWSER_DEPS): scripts/browser/package.json scripts/browser/package-lock.json
	@cd scripts/browser && npm ci --no-audit --no-fund --ignore-scripts --silent
	@touch $@

.PHONY: browser-deps
browser-deps: $(BROWSER_DEPS) ## Install the browser tests' axe-core, MCP SDK client and esbuild from the lockfile

# The e2e tests drive Debian's chromium (apt-get install when missing; a no-op when present).
# e2e sets ZEST_REQUIRE_ALL=1, so a missing browser fails the browser tests, never skips them.
.PHONY: chromium
chromium: ## Install Debian's chromium for the browser tests when it is missing
	@scripts/ensure-apt.sh chromium

# The metrics e2e test runs Debian's prometheus (apt-get install when missing; a no-op when
# present). The test starts its own on 127.0.0.1 and stops it; the package's service is unused.
.PHONY: prometheus
prometheus: ## Install Debian's prometheus for the metrics e2e test when it is missing
	@scripts/ensure-apt.sh prometheus

# Sandboxed stdio servers (docs/operator/untrusted-tools.md) run under Debian's bubblewrap; the tool
# host's sandbox tests need it (apt-get install when missing; a no-op when present).
.PHONY: bubblewrap
bubblewrap: ## Install Debian's bubblewrap (bwrap) for the sandboxed stdio servers when it is missing
	@scripts/ensure-apt.sh bwrap bubblewrap

.PHONY: bench
bench: build peers etcd ## Benchmarks on real processes (tool host, tool-call chain, /mcp, streaming chat, federation against peers, tool catalog at 10/30/100 servers, 1 and 2 of each service) and tool search over 578 real tools; markdown tables
	@cd bench && ZEST_ETCD_BIN=$(ETCD) go run . -bin $(CURDIR)/bin -peers $(CURDIR)/scripts/peers/node_modules
