# Shoal's build. Needs only Go; everything else (staticcheck) is fetched
# through the Go toolchain at a pinned version.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 60s
FUZZSMOKE   ?= 500x
BENCHTIME   ?= 1s
PKGS        ?= ./...

# Pebble's default zstd is a cgo library whose cold build takes minutes;
# builds use the pure-Go one. Race builds need cgo, and the pebblegozstd tag
# keeps the C library out of those too.
export CGO_ENABLED ?= 0
RACE_TAGS := pebblegozstd
# Tests build with the invariants tag: the code's invariant checks
# (internal/invariants) run in them, and panic when one breaks. -race
# turns them on too. Release builds (make build, go build) leave them out.
TEST_TAGS := invariants
# Everything but the simulator, which sim-mutants tests (without -race).
RACE_PKGS = $(filter-out %/sim,$(shell $(GO) list $(PKGS)))

.PHONY: all build run test test-race vet lint staticcheck fuzz fuzz-smoke soak chaos bench clean sim sim-mutants sim-fresh sim-hunted sim-scale

all: build

build:
	$(GO) build ./...
	@if [ -d cmd ]; then mkdir -p bin && $(GO) build -o bin/ ./cmd/...; fi

# A local 3-node cluster on 127.0.0.1 (client ports 7101-7103, the
# default of shoalctl); Ctrl-C stops it. DEVFLAGS passes more flags, e.g.
# make run DEVFLAGS="--nodes 5 --dir /tmp/shoal".
DEVFLAGS ?=
run:
	$(GO) build -o bin/ ./cmd/shoal ./cmd/shoalctl
	bin/shoal dev --nodes 3 $(DEVFLAGS)

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

lint: vet staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

# The race detector needs cgo and a C compiler; without one the suite still
# runs, without -race, and says so. -count=1: the process tests build the
# binaries from the tree themselves, which Go's test cache cannot see, so a
# cached pass could be one from older code. netio's tests run twice: on
# its event loops (its default) and, with NETIO_GOROUTINES=1, on goroutines
# (what a node runs).
test-race:
	@if command -v $${CC:-cc} >/dev/null 2>&1; then \
		echo "go test -race $(PKGS) (the simulator: in sim-mutants)"; \
		CGO_ENABLED=1 $(GO) test -race -count=1 -tags $(RACE_TAGS) -timeout 8m $(RACE_PKGS) && \
		NETIO_GOROUTINES=1 CGO_ENABLED=1 $(GO) test -race -count=1 -tags $(RACE_TAGS) -timeout 2m ./netio; \
	else \
		echo "no C compiler: running tests without -race"; \
		$(GO) test -count=1 -tags $(TEST_TAGS) -timeout 8m $(RACE_PKGS) && \
		NETIO_GOROUTINES=1 $(GO) test -count=1 -tags $(TEST_TAGS) -timeout 2m ./netio; \
	fi

# The race suite keeps about half of two cores busy (its tests wait on
# timers and sockets), so the simulator's mutants, one core's work that
# waits on nothing, run beside it at the lowest priority (nice): they take
# the time the suite leaves, and its timed tests see no more load than
# alone. Their report follows the suite's.
test: lint
	@out=$$(mktemp); nice=$$(command -v nice >/dev/null 2>&1 && echo "nice -n 19"); \
	$$nice $(MAKE) --no-print-directory sim-mutants >$$out 2>&1 & pid=$$!; \
	$(MAKE) --no-print-directory test-race; race=$$?; \
	wait $$pid; mut=$$?; cat $$out; rm -f $$out; \
	if [ $$race -ne 0 ] || [ $$mut -ne 0 ]; then echo "make test: race suite exit $$race, mutants exit $$mut"; exit 1; fi
	@$(MAKE) --no-print-directory sim-fresh fuzz-smoke

# The deterministic simulator (package sim): make sim SEEDS=N runs N seeds
# from a random one (FROM=first: from that one) in parallel, one process
# per core, with progress, and prints the range it runs; make sim SEED=N
# replays one seed and prints its violations and trace. SIMFLAGS passes
# more flags (-nodes, -shards, -faulty, -calm, -j, -budget).
SEEDS    ?= 1000
SEED     ?=
FROM     ?=
SIMFLAGS ?=
sim:
	@$(GO) build -o bin/shoalsim ./cmd/shoalsim
	@if [ -n "$(SEED)" ]; then bin/shoalsim -seed $(SEED) $(SIMFLAGS); \
	else bin/shoalsim -seeds $(SEEDS) $(if $(FROM),-from $(FROM)) $(SIMFLAGS); fi

# Fresh seeds for make test: up to FRESH seeds from a random one, one
# process per core, of which none starts after FRESHTIME of wall time; it
# prints the range it ran, and each failing seed replays with make sim
# SEED=N. The simulator is built with the invariant checks, which cost
# about a tenth more. A seed takes about 1 to 1.4 s of a core: 2 cores run
# some 45 to 60 seeds in 30 s, fewer when busy (make sim SEEDS=N sweeps more).
FRESH     ?= 300
FRESHTIME ?= 30s
sim-fresh:
	@$(GO) build -tags $(TEST_TAGS) -o bin/shoalsim ./cmd/shoalsim
	bin/shoalsim -seeds $(FRESH) -budget $(FRESHTIME) $(SIMFLAGS)

# Scale mode of the simulator: clusters of SCALE nodes, one after the
# other, each in its own process; prints per-node cost against N (the
# table in bench/README.md). Not part of make test: 1,000 nodes take about
# 13 minutes and 9 GiB. SCALEFLAGS passes more flags (-seed, -window, -bound,
# -shards, -json, -cpuprofile).
SCALE      ?= 100,300,1000
SCALEFLAGS ?=
sim-scale:
	@$(GO) build -o bin/shoalsim ./cmd/shoalsim
	bin/shoalsim -scale $(SCALE) $(SCALEFLAGS)

# The simulator's tests (its fixed seeds, replay, the mutants), without
# -race: a run is one goroutine by design, and without the detector they
# take 8 seeds instead of 2 in a fraction of the time. Each deliberate bug
# (internal/mutant) must be caught within a few seeds; raftmux's own test
# must catch its mutant too. The mutants not yet required (mutant.Hunted)
# run with SHOAL_SIM_HUNTED=1 (make sim-hunted).
sim-mutants:
	$(GO) test -count=1 -tags mutants,$(TEST_TAGS) -timeout 6m ./sim
	$(GO) test -count=1 -tags mutants,$(TEST_TAGS) -run Mutants -timeout 2m ./raftmux

sim-hunted:
	SHOAL_SIM_HUNTED=1 $(GO) test -count=1 -tags mutants,$(TEST_TAGS) -run Mutants -v -timeout 10m ./sim

fuzz-smoke:
	@FUZZTIME=$(FUZZSMOKE) FUZZTAGS=$(TEST_TAGS) GO=$(GO) scripts/fuzz.sh

fuzz:
	@FUZZTIME=$(FUZZTIME) FUZZTAGS=$(TEST_TAGS) GO=$(GO) scripts/fuzz.sh

# A long churn of a 5-node cluster of real processes (kill -9, pause,
# restart) under a write load, then checks that nothing acknowledged was
# lost; as root, then as long again with network cuts (make chaos). make
# test runs the churn for 20 s. SOAKTIME sets the length; a failure keeps
# every node's whole log under SHOAL_TEST_LOGS.
SOAKTIME ?= 10m
soak:
	@d=$${SHOAL_TEST_LOGS:-$$(mktemp -d)}; echo "soak for $(SOAKTIME); node logs go to $$d"; \
	SHOAL_TEST_LOGS=$$d $(GO) test ./tests -run TestProcessSoak -count=1 -v -soak $(SOAKTIME) -timeout 60m
	@$(MAKE) --no-print-directory chaos CHAOSTIME=$(SOAKTIME)

# Real shoal node processes, each in its own network namespace, under a
# produce load while nodes are cut off, links cut one way and processes
# paused, for CHAOSTIME; then the clients' history is checked (one owner
# at a time, epochs never back, nothing acknowledged lost). Needs root.
CHAOSTIME ?= 2m
chaos:
	@if [ "$$(id -u)" != 0 ]; then echo "chaos: skipped: needs root (network namespaces)"; exit 0; fi; \
	d=$${SHOAL_TEST_LOGS:-$$(mktemp -d)}; echo "chaos for $(CHAOSTIME); node logs go to $$d"; \
	SHOAL_TEST_LOGS=$$d $(GO) test ./tests -run '^TestChaos$$' -count=1 -v -chaos $(CHAOSTIME) -timeout 90m

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

clean:
	rm -rf bin
