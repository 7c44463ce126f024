# The tests run with -race on a real Mongo wire-protocol server that they start
# themselves: FerretDB on a throwaway PostgreSQL server when one is installed
# (several times faster), in one process of its own built without -race that
# every test process shares (scripts/with-postgres --ferretdb), else embedded
# in each test process on SQLite; MONGO_URI selects a real MongoDB instead.

GO ?= go
PKGS ?= ./...

# The tests of subscription/esdbv4 run EventStore-Client-Go v4 against the
# esdbtest double, which is built on KurrentDB-Client-Go's protocol code: that
# test binary links both official clients, whose generated code registers the
# same protobuf names, and would panic as it starts. It is linked with the
# protobuf registry's conflict policy set to ignore, a variable of
# google.golang.org/protobuf/reflect/protoregistry (outside that module's
# compatibility promise). No other binary links both (cmd/projector's tests
# check it); each links the adapter its app.Config.Dial names.
BOTH_CLIENTS ?= -ldflags=-X=google.golang.org/protobuf/reflect/protoregistry.conflictPolicy=ignore

.PHONY: test test-sqlite test-docker test-docker-kurrentdb test-compose demo bench bench-undecodable bench-large build fuzz lint

# The example is a module of its own (examples/library): its tests run after
# the project's, as a user's would.
EXAMPLES ?= examples/library

test:
	scripts/with-postgres --ferretdb $(GO) test -race -count=1 -timeout 25m $(BOTH_CLIENTS) $(PKGS)
	for m in $(EXAMPLES); do (cd $$m && $(GO) test -race -count=1 -timeout 15m ./...) || exit 1; done

# The same tests on FerretDB's SQLite backend, the embedded default.
test-sqlite:
	PROJECTOR_TEST_POSTGRES= $(GO) test -race -count=1 -timeout 40m $(BOTH_CLIENTS) $(PKGS)
	for m in $(EXAMPLES); do (cd $$m && $(GO) test -race -count=1 -timeout 15m ./...) || exit 1; done

# Only the Docker tier (EventStoreDB and MongoDB in testcontainers); skips
# without a Docker engine.
test-docker:
	$(GO) test -race -count=1 -run Docker -v $(BOTH_CLIENTS) $(PKGS)

# The Docker tier on a KurrentDB node instead of EventStoreDB.
test-docker-kurrentdb:
	PROJECTOR_TEST_ESDB_IMAGE=kurrentplatform/kurrentdb:25.0 $(GO) test -race -count=1 -run Docker -v $(BOTH_CLIENTS) $(PKGS)

# The Docker tier against the servers of docker-compose.yml: starts them,
# runs the real-server tests, stops them.
COMPOSE ?= docker compose
test-compose:
	$(COMPOSE) up -d --wait eventstore mongo
	PROJECTOR_TEST_ESDB='esdb://localhost:2113?tls=false' MONGO_URI='mongodb://localhost:27017/?directConnection=true' \
		$(GO) test -race -count=1 -run Docker -v $(BOTH_CLIENTS) $(PKGS); status=$$?; $(COMPOSE) down -v; exit $$status

demo:
	$(GO) run ./cmd/projector-lab demo

# Catch-up three ways on the same events (the projector, the seed's per-event
# code, the bulk-write floor), with ratios to the floor F (reading the events
# plus writing each document once); on FerretDB's PostgreSQL backend when
# PostgreSQL is installed (BENCH_SQLITE=1: on the embedded SQLite default).
# One run per workload, carts:interleaving[:read model], each of 20 events a
# cart: 200 carts (with A's memory at 10x the events and the live latency)
# and 2,000, shuffled over the log and clustered (B on a sample of 4,000
# events); in each, A, L and R are timed 3 times in turns and the medians
# reported (--rounds). The read model is the cart details by default; client
# (a document per client fed by its carts, RevisionMap) and shop (one document
# fed by every cart, HandledIDs) are compared with the details on the same
# events (D); shuffled, A is timed again at 10x the events over the same
# documents and at 10x the documents, and the live latency is of the same
# shape. make bench-large runs 20,000 carts (400,000 events).
# BENCH_FLAGS passes flags to every run. Then G, the same 2,000 carts
# shuffled projected by BENCH_GROUP competing consumers of a persistent
# subscription group (as run --group), one round beside A, L and R, in a run
# of its own so that the lines above stay comparable (BENCH_GROUP=0: not; G
# handles each event on its own: 2 to 3 minutes here). Last, tracing's
# overhead on A at 200 carts, every event traced, 15 runs each way in turns
# (BENCH_TRACE=0: not).
BENCH_FLAGS ?=
BENCH_TRACE ?= 1
BENCH_GROUP ?= 3
BENCH_WORKLOADS ?= 200:shuffled 200:clustered 2000:shuffled 2000:clustered \
	2000:shuffled:client 2000:clustered:client 2000:shuffled:shop 2000:clustered:shop
BENCH_SQLITE ?=
bench:
	$(GO) build -o bin/projector-bench ./cmd/projector-lab
	scripts/with-postgres sh -c 'pg="$${PROJECTOR_TEST_POSTGRES:+$$PROJECTOR_TEST_POSTGRES?pool_max_conns=200}"; \
	  [ -z "$(BENCH_SQLITE)" ] || pg=""; \
	  for w in $(BENCH_WORKLOADS); do \
	    carts=$${w%%:*}; rest=$${w#*:}; interleave=$${rest%%:*}; model=details; [ "$$rest" = "$$interleave" ] || model=$${rest#*:}; \
	    more=""; [ "$$carts" -gt 200 ] && more="--memory-scale 0 --live-events 0"; \
	    [ $$model = details ] || { more="--skip-b --memory-scale 0 --live-events 0"; \
	      [ $$interleave = clustered ] || more="--skip-b --documents-scale 10"; }; \
	    bin/projector-bench bench --postgres "$$pg" --carts $$carts --interleave $$interleave --projection $$model --b-sample 4000 $$more $(BENCH_FLAGS) || exit 1; \
	  done; \
	  [ "$(BENCH_GROUP)" = 0 ] || bin/projector-bench bench --postgres "$$pg" --carts 2000 --interleave shuffled --skip-b --memory-scale 0 --live-events 0 \
	    --rounds 1 --group-consumers $(BENCH_GROUP) $(BENCH_FLAGS) || exit 1; \
	  [ "$(BENCH_TRACE)" = 0 ] || bin/projector-bench bench --postgres "$$pg" --carts 200 --skip-b --memory-scale 0 --live-events 0 \
	    --trace-rounds 15 --traced-events $(BENCH_FLAGS)'

# One event whose payload does not decode in a catch-up of 3,000 events and
# in a rebuild, against the same log without it, on the embedded default
# (FerretDB on SQLite): the ratios, slowed/clean, over 3 rounds in turns.
bench-undecodable:
	PROJECTOR_TEST_POSTGRES= $(GO) test ./cmd/projector-lab -run '^$$' -bench OneUndecodableEvent -benchtime 3x -count=1

bench-large:
	$(MAKE) bench BENCH_WORKLOADS="20000:shuffled 20000:clustered 20000:shuffled:client 20000:shuffled:shop" BENCH_TRACE=0 BENCH_GROUP=0

build:
	$(GO) build -o bin/projector ./cmd/projector

fuzz:
	$(GO) test ./internal/cart -run '^$$' -fuzz FuzzMerge -fuzztime 60s
	$(GO) test ./projector -run '^$$' -fuzz FuzzMetadataContext -fuzztime 60s

# staticcheck, pinned; fetched from the module proxy on first use.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOCYCLO ?= github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0

# lint also checks what a maintainer carries: no function over 80 lines,
# none of complexity over 20 outside esdbtest, and at most 661 exported names
# across the public packages (scripts/codesize -v lists them).
lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) mod tidy -diff
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	for m in $(EXAMPLES); do (cd $$m && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...) || exit 1; done
	$(GO) run ./scripts/codesize
	$(GO) run $(GOCYCLO) -over 20 -ignore '_test\.go$$|^esdbtest/' .
