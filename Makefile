# The tests run with -race on a real Mongo wire-protocol server that they start
# themselves: embedded FerretDB, on a throwaway PostgreSQL server when one is
# installed (several times faster), else on SQLite; MONGO_URI selects a real
# MongoDB instead.

GO ?= go
PKGS ?= ./...

.PHONY: test test-sqlite test-docker demo build fuzz lint

test:
	scripts/with-postgres $(GO) test -race -count=1 -timeout 25m $(PKGS)

# The same tests on FerretDB's SQLite backend, the embedded default.
test-sqlite:
	PROJECTOR_TEST_POSTGRES= $(GO) test -race -count=1 -timeout 40m $(PKGS)

# Only the Docker tier (MongoDB in testcontainers); skips without a Docker engine.
test-docker:
	$(GO) test -race -count=1 -run Docker -v $(PKGS)

demo:
	$(GO) run ./cmd/projector demo

build:
	$(GO) build -o bin/projector ./cmd/projector

fuzz:
	$(GO) test ./cart -run '^$$' -fuzz FuzzMerge -fuzztime 60s

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet $(PKGS)
