# Two commands do everything on a fresh Debian machine with Go installed:
#   make run    score the exact-match example in testdata/
#   make test   run the whole test suite
GO      ?= go
BIN     := bin/skynet
EXAMPLE := testdata/exact_match

.PHONY: all deps build run check test vet fmt-check bench clean

all: build

deps:
	@bash build/deps.sh

build: deps
	$(GO) build -o $(BIN) ./cmd/skynet

run: build
	./$(BIN) check --metric $(EXAMPLE)/metric.py --data $(EXAMPLE)/cases.jsonl
	./$(BIN) score --metric $(EXAMPLE)/metric.py --data $(EXAMPLE)/cases.jsonl

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: deps
	$(GO) vet ./...

test: deps fmt-check vet
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./...

bench: deps
	$(GO) test -run='^$$' -bench=. -benchtime=20000x ./engine

clean:
	rm -rf bin
