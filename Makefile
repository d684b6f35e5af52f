GO      ?= go
BIN     ?= bin/converge
PKGS    ?= ./...

.PHONY: build test test-short scenarios vet staticcheck run sim fmt fuzz

build:
	$(GO) build -o $(BIN) ./cmd/converge

# The test command CI runs (README, .ci/run). staticcheck is the version go.mod
# pins as a tool; -race catches data races in the simulator's task engine and
# the adapter; -count=1 defeats the test cache.
test:
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

staticcheck:
	$(GO) tool staticcheck $(PKGS)

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

# Runs every role, an embedded NATS and the simulator with demo guests
# (what the README's quick start runs); ARGS are up's flags.
ARGS ?=
run: build
	./$(BIN) up $(ARGS)

fmt:
	gofmt -w .

# Every fuzz target in turn, FUZZTIME each (docs/fuzzing.md). Their seed
# corpora (f.Add and testdata/fuzz) already run as tests in `make test`;
# this searches for new inputs. A finding is written under the package's
# testdata/fuzz/ and stops the run.
FUZZTIME ?= 5m
FUZZFLAGS ?=
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg; \
		done; \
	done

# go-proxmox's own integration tests (v0.8.1's tests/integration) against
# the simulator; the ones left out, and why: e2e/goproxmox/SKIPPED.md.
.PHONY: goproxmox-it
goproxmox-it:
	GO=$(GO) ./e2e/goproxmox/run.sh
