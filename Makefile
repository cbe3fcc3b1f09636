# Two commands do everything on a fresh Debian machine with Go installed:
#   make run    score the exact-match example in testdata/
#   make test   run the whole test suite
# PYTHON=/path/to/python3 builds and tests against that CPython (3.10-3.13)
# instead of Debian's python3-embed; make test-pythons tries every one found.
GO      ?= go
BIN     := bin/skynet
EXAMPLE := testdata/exact_match

# With PYTHON= on the command line, every go command runs in build/pyenv.sh's
# environment: pkg-config finds PYTHON's python-3.X-embed, and an rpath to its
# LIBDIR. A PYTHON exported in the environment (node-gyp uses one) is ignored,
# so it cannot change the default build.
# Without it, in build/static.sh's: the default build (python3-embed) links
# libpython3.X.a into the binary when the platform ships one (Debian's
# libpython3.X-dev does), the speed of the distribution's own python3.X; else,
# saying so once, the shared library. LIBPYTHON=shared links the shared one, as
# a plain go build does.
PY := $(if $(filter command line,$(origin PYTHON)),$(PYTHON))
LIBPYTHON ?= static
GO_PLAIN := $(GO)
ifneq ($(PY),)
override GO := build/pyenv.sh $(PY) $(GO)
else ifneq ($(LIBPYTHON),shared)
override GO := build/static.sh $(GO)
endif
# The default build's note on linking the shared libpython, at the top level.
SAY_LIBPYTHON := $(if $(PY)$(filter shared,$(LIBPYTHON))$(filter-out 0,$(MAKELEVEL)),,build/static.sh --say)

.PHONY: all deps pyvenv build run check test test-slurm test-pythons test-ray vet fmt-check docs-check docs-screenshot asan bench bench-cli bench-cpu bench-serve bench-latency soak fuzz clean

all: build

deps:
	@bash build/deps.sh $(PY)
	@$(or $(SAY_LIBPYTHON),:)

# -buildvcs=auto: skynet version and a results file's OUT.meta.json name the
# git revision built (a go env GOFLAGS=-buildvcs=false would drop it).
build: deps
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/skynet

# The pinned Python test venv (build/pyvenv.sh, build/python-test.lock): the
# peers' own code (DSPy, GEPA, Math-Verify) for the tests that run it, made
# once per lock file in ~/.cache/skynet and linked as bin/pyvenv. It is made
# from the CPython the binary embeds, whose workers import its packages too.
pyvenv: deps
	@mkdir -p bin
	@venv="$$(bash build/pyvenv.sh $(PY))" && ln -sfn "$$venv" bin/pyvenv

run: build
	./$(BIN) check --metric $(EXAMPLE)/metric.py --data $(EXAMPLE)/cases.jsonl
	./$(BIN) score --metric $(EXAMPLE)/metric.py --data $(EXAMPLE)/cases.jsonl

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: deps
	$(GO) vet ./...

# The first pass runs the tests of the peers' own code (SKYNET_TEST_VENV);
# -race and ASan leave them out (they skip, saying so).
test: deps fmt-check vet pyvenv
	SKYNET_TEST_VENV=$(CURDIR)/bin/pyvenv $(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./...
	$(MAKE) --no-print-directory asan
	$(MAKE) --no-print-directory fuzz FUZZTIME=5000x

# The README and docs/ against the code (cmd/skynet/docs_test.go: the README's
# length and sections, every command it shows run and its output compared,
# docs/cli.md's flag table against every command's -h, exit codes, the worked
# reward example, the Go example built as pasted, links) and the fault table
# in docs/faults.md against the faults; make test runs both with the rest.
docs-check: deps
	$(GO) test -count=1 -run '^TestDocs' ./cmd/skynet
	$(GO) test -count=1 -run '^TestFaultCatalogue$$' ./engine

# docs/report.png, the README's picture of skynet report's page: the
# README's two runs of the example, rendered in headless Chromium.
docs-screenshot: build
	./$(BIN) score --metric $(EXAMPLE)/metric.py --data $(EXAMPLE)/cases.jsonl --out bin/base.jsonl
	./$(BIN) score --metric $(EXAMPLE)/lenient.py --data $(EXAMPLE)/cases.jsonl --out bin/new.jsonl
	./$(BIN) report bin/new.jsonl --base bin/base.jsonl -o bin/report.html
	chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
	  --disable-component-update --disable-sync --user-data-dir=$$(mktemp -d) --window-size=1280,1250 \
	  --screenshot=$(CURDIR)/docs/report.png file://$(CURDIR)/bin/report.html

# deploy/slurm/skynet-array.sbatch as a 4-task array under a real Slurm on
# localhost (build/slurm-local.sh: root; installs slurm-wlm and munge with
# apt-get), merged and compared with one skynet score run. It skips, saying
# why, where Slurm cannot run.
test-slurm: deps
	SKYNET_SLURM_TEST=1 $(GO) test -count=1 -v -run TestSlurmArray ./cmd/skynet

# go test ./... against each shared CPython 3.10-3.13 found (pyenv's, and
# python3.1X on PATH), one line each; -race, ASan and fuzz stay in make test.
# skynet_client.ray on a local Ray cluster of two nodes (the head and a
# second node on loopback; ray[default] from the pinned venv): one skynet serve
# per node as actors, one killed mid-run, and deploy/ray/score_job.py as a
# Ray job, each compared case by case with skynet score (build/test-ray.sh).
test-ray: build pyvenv
	bash build/test-ray.sh

test-pythons:
	@GO='$(GO_PLAIN)' bash build/test-pythons.sh

# The C layer under AddressSanitizer and LeakSanitizer. libpython's own
# allocations are suppressed: the interpreter is never finalised, so what it
# holds at exit is not a leak (build/lsan.supp). A static libpython has no
# frame pointers, so leaks are unwound from DWARF (fast_unwind_on_malloc=0) to
# reach the Py* frames that the suppressions name.
asan: deps
	ASAN_OPTIONS=fast_unwind_on_malloc=0$(if $(ASAN_OPTIONS),:$(ASAN_OPTIONS)) LSAN_OPTIONS=suppressions=$(CURDIR)/build/lsan.supp$(if $(LSAN_OPTIONS),:$(LSAN_OPTIONS)) $(GO) test -asan -count=1 ./cpython ./skynetmod ./engine ./pool

# Go benchmarks of the engine paths (for benchstat), and the side-by-side CLI bench.
bench: deps
	$(GO) test -run='^$$' -bench='Score|PythonLoop|Ratio|Workers/cpu' -benchtime=200000x -count=5 ./engine
	$(GO) test -run='^$$' -bench='Workers/sleep|JudgeWorkers' -benchtime=2s ./engine
	$(GO) test -run='^$$' -bench=AsyncJudge -benchtime=3s ./engine
	$(GO) test -run='^$$' -bench=ScoreBatchC -benchtime=2000000x -count=3 ./cpython
	@echo "ScoreAllFile on one CPU: the stream's two threads share it"
	taskset -c 0 $(GO) test -run='^$$' -bench=ScoreAllFile -benchtime=300000x -count=3 ./engine

bench-cli: build
	$(or $(PY),python3) -c "import json; l=[json.loads(x) for x in open('$(EXAMPLE)/cases.jsonl') if x.strip()]; open('bin/big.jsonl','w').write(''.join(json.dumps(dict(l[i%len(l)], id=f'c{i}'))+'\n' for i in range(200000)))"
	./$(BIN) bench --metric $(EXAMPLE)/metric.py --cases 50000 --runs 5 --file bin/big.jsonl

# A metric that does real work (difflib, ~200 us a case) on 4,000 cases,
# then the cheap graders written as the real ones are (testdata/cheap: a
# gsm8k-style regex answer extractor, a normalised exact match, a token F1)
# and the trivial exact match on 100,000 cases (CHEAP_CASES), and a grader
# that forks once a case (testdata/fork, 2,000 cases): skynet score
# with 1 and N worker processes (PROCESSES, default auto: one per CPU), the
# plain script and a multiprocessing.Pool(N) script, as ratios of wall time
# and of CPU (user+sys of each process tree), with each path's peak RSS.
PROCESSES ?= auto
CHEAP_CASES ?= 100000
bench-cpu: build
	$(or $(PY),python3) testdata/difflib/make_cases.py 4000 > bin/difflib.jsonl
	./$(BIN) bench --metric testdata/difflib/metric.py --file bin/difflib.jsonl --file-only --runs 5 --processes $(PROCESSES)
	for g in gsm8k_regex exact_norm token_f1; do \
	  $(or $(PY),python3) testdata/cheap/make_cases.py $$g $(CHEAP_CASES) > bin/cheap_$$g.jsonl && \
	  ./$(BIN) bench --metric testdata/cheap/$$g/metric.py --file bin/cheap_$$g.jsonl --file-only --runs 5 --processes $(PROCESSES) || exit 1; \
	done
	$(or $(PY),python3) -c "import json; l=[json.loads(x) for x in open('$(EXAMPLE)/cases.jsonl') if x.strip()]; open('bin/trivial.jsonl','w').write(''.join(json.dumps(dict(l[i%len(l)], id=f'c{i}'))+'\n' for i in range($(CHEAP_CASES))))"
	./$(BIN) bench --metric $(EXAMPLE)/metric.py --file bin/trivial.jsonl --file-only --runs 5 --processes $(PROCESSES)
	$(or $(PY),python3) testdata/fork/make_cases.py 2000 > bin/fork.jsonl
	./$(BIN) bench --metric testdata/fork/metric.py --file bin/fork.jsonl --file-only --runs 5 --processes $(PROCESSES)

# skynet serve against skynet score on the same case files (internal/benchserve):
# score's rate, serve's as 4 clients post NDJSON batches over loopback, and the
# ratio, for the trivial example (200,000 cases) and the difflib metric; then
# the request shapes trainers send (--shapes: one sample and 64 cases a
# request at 1 to 1,024 connections, beside 1,000-case requests; p50, p99,
# server CPU a request, and pool.Score's latency without HTTP); then skynet
# serve beside the reward servers users write instead (--rewards: aiohttp in
# one process, FastAPI on uvicorn --workers N, from the pinned venv), all on
# POST /v1/rewards with OpenRLHF's body, for a sub-microsecond exact match
# with named scores and a ~0.2 ms difflib similarity: req/s, p50, p99, CPU a
# request, and skynet ÷ the best Python server.
REWARDS := internal/benchserve/testdata
bench-serve: build pyvenv
	$(or $(PY),python3) -c "import json; l=[json.loads(x) for x in open('$(EXAMPLE)/cases.jsonl') if x.strip()]; open('bin/big.jsonl','w').write(''.join(json.dumps(dict(l[i%len(l)], id=f'c{i}'))+'\n' for i in range(200000)))"
	$(or $(PY),python3) testdata/difflib/make_cases.py 4000 > bin/difflib.jsonl
	$(GO) run ./internal/benchserve --bin $(BIN) --metric $(EXAMPLE)/metric.py --data bin/big.jsonl --processes $(PROCESSES)
	$(GO) run ./internal/benchserve --bin $(BIN) --metric testdata/difflib/metric.py --data bin/difflib.jsonl --batch 250 --processes $(PROCESSES)
	$(GO) run ./internal/benchserve --shapes --bin $(BIN) --metric $(EXAMPLE)/metric.py --data bin/big.jsonl --processes $(PROCESSES)
	$(GO) run ./internal/benchserve --rewards --bin $(BIN) --metric $(REWARDS)/exact_named/metric.py --python bin/pyvenv/bin/python --processes $(PROCESSES)
	$(GO) run ./internal/benchserve --rewards --bin $(BIN) --metric $(REWARDS)/difflib_label/metric.py --samples edited --python bin/pyvenv/bin/python --processes $(PROCESSES)

# One call at a time (internal/benchserve --latency), p50/p90/p99 over 20,000
# calls each: engine.Score in this process, pool.Score with one worker,
# skynet serve over one keep-alive connection, beside a Python worker forked
# once on a socketpair and multiprocessing.Pool(1).apply on the CPython the
# binary embeds; then the spec's ratios.
bench-latency: build
	$(GO) run ./internal/benchserve --latency --bin $(BIN) --metric $(REWARDS)/exact_named/metric.py $(if $(PY),--python $(PY))

# The full soaks: RSS after 1,000,000 cases within 5 MB of RSS after 10,000,
# and 100,000 judge cases against a model server injecting faults (make test
# runs both on fewer cases); then the real-world metric classes in four pools
# at once, every result held to reference.py's (5 rounds, about 3 minutes).
soak: deps
	SKYNET_SOAK=1000000 $(GO) test -count=1 -run '^TestSoak$$' -v ./engine
	SKYNET_LLM_SOAK=100000 $(GO) test -count=1 -run '^TestModelFaultSoak$$' -v -timeout 30m ./engine
	SKYNET_CLASSES_SOAK=5 $(GO) test -count=1 -run '^TestClassesSoak$$' -v -timeout 30m ./pool

# FUZZTIME is a duration (30s) or a count of inputs (5000x). make test uses a
# count: under Go 1.26 a duration can end in a spurious "context deadline
# exceeded" failure when it expires mid-input (go.dev/issue/75804, fixed in
# Go 1.27), and a loaded CI machine makes that likelier.
FUZZTIME ?= 30s
fuzz: deps
	for t in FuzzAppendJSON FuzzSplitObject FuzzDecode FuzzCodecThroughPython; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./cpython || exit 1; done
	for t in FuzzParseCase FuzzCaseReader FuzzQuickID; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./caseio || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzValidateReturn$$' -fuzztime $(FUZZTIME) ./engine
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./reward

clean:
	rm -rf bin
