# Entry points people expect; each is a thin wrapper over a deno task (see deno.json).
DENO := .tools/bin/deno

.PHONY: test setup build bench manager clean

test: setup ## install what is missing, then fmt check, lint, type check and all tests
	$(DENO) task ci

setup:
	@bash scripts/setup.sh

build: setup ## build the WebAssembly modules
	$(DENO) task build:wasm

bench: setup build ## run the benchmarks (figures go to docs/benchmarks.md by hand)
	$(DENO) task bench

manager: setup build ## run a manager with manager/manager.example.json
	$(DENO) task manager --config manager/manager.example.json

clean:
	rm -rf wasm/build .state
