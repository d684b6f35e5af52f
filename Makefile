GO      ?= go
BIN     ?= bin/converge
PKGS    ?= ./...

.PHONY: build test test-short scenarios vet run sim fmt

build:
	$(GO) build -o $(BIN) ./cmd/converge

# The test command CI runs (README, .ci/run). -race catches data races in the
# simulator's task engine and the adapter; -count=1 defeats the test cache.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# The scripted scenarios of the planner engine and the executor alone
# (planner/testdata, executor/testdata): no server, milliseconds each.
scenarios:
	$(GO) test -count=1 -run TestScenarios -v ./planner/ ./executor/

test-short:
	$(GO) test -short -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)

# Runs the standalone Proxmox VE API simulator with demo guests.
sim: build
	./$(BIN) sim --listen 127.0.0.1:8006 --nodes 3 --guests 12

run: sim

fmt:
	gofmt -w .
