# Tensormorph: every target does its own set-up on a fresh Debian 12 machine.
#   make run    build, write the demo tensor, compute its statistics
#   make test   build and run the whole test suite (release)
#   make test-asan   the same suite under AddressSanitizer + UBSan
#   make bench  throughput benchmarks beside memcpy and numpy (writes bench/last-run.md)
.PHONY: deps build run test test-asan bench docs clean

JOBS ?= $(shell nproc)

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

run: build
	@build/tensormorph demo --out build/demo
	@build/tensormorph stats --raw build/demo/demo-weight.bf16 --dtype bf16 --shape 2048,4096

test: build
	@ctest --preset release -j $(JOBS)

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

bench: build
	@/usr/bin/python3 bench/run_bench.py --build build

docs: build
	@/usr/bin/python3 scripts/gen-backends-doc.py

clean:
	rm -rf build build-debug build-asan
