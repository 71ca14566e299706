# Entry points people expect; each is a thin wrapper over a deno task (see deno.json).
DENO := .tools/bin/deno

.PHONY: test test-quick demo setup build bench bench-cni manager stack-up stack-down clean fuzz

test: setup ## install what is missing, then fmt check, lint, type check and all tests
	$(DENO) task ci

test-quick: ## the unit tests beside the code (no root, Open vSwitch or etcd), in under a minute
	@bash scripts/setup.sh --deno-only
	$(DENO) task build:wasm
	$(DENO) task test:quick

FUZZ_RUNS ?= 1000
FUZZ_MS ?= 600000

fuzz: setup build ## the manager's property-based API suite, long: FUZZ_RUNS sequences within FUZZ_MS ms
	KNITTER_FUZZ_RUNS=$(FUZZ_RUNS) KNITTER_FUZZ_MS=$(FUZZ_MS) $(DENO) test --allow-all manager/fuzz_test.ts

DEMO_DIR ?= .state/demo
DEMO_FLAGS ?=

demo: ## the main job (as root): a stack with two tenants' networks and pods, a measured connectivity matrix
	@[ "$$(id -u)" = 0 ] || { echo "demo: needs root (network namespaces, Open vSwitch): run sudo make demo" >&2; exit 1; }
	@$(MAKE) --no-print-directory setup build
	$(DENO) task demo --dir $(DEMO_DIR) $(DEMO_FLAGS)

setup:
	@bash scripts/setup.sh

build: setup ## build the WebAssembly modules and the CNI plugin (plugin/build/knitter, with gcc)
	$(DENO) task build:wasm
	$(DENO) task build:plugin

binaries: setup ## deno compile of every component into dist/ (DENORT_BIN: see deploy/README.md)
	$(DENO) task build:bin

bench: setup build ## run the benchmarks (figures go to docs/benchmarks.md by hand)
	$(DENO) task bench

bench-cni: setup build ## CNI and dataplane benchmarks, as root (figures go to docs/benchmarks.md by hand)
	$(DENO) task bench:cni

STACK_DIR ?= .state/stack
NODES ?= 2
PHYSNETS ?=

stack-up: setup build ## a manager and $(NODES) simulated nodes in $(STACK_DIR), left running (as root)
	$(DENO) task stack up --dir $(STACK_DIR) --nodes $(NODES) $(if $(PHYSNETS),--physnets $(PHYSNETS))

stack-down: ## stop and remove everything the stack in $(STACK_DIR) made
	$(DENO) task stack down --dir $(STACK_DIR)

manager: setup build ## run a manager with manager/manager.example.json
	$(DENO) task manager --config manager/manager.example.json

clean: ## remove build output and .state (a stack recorded there is taken down first)
	@if [ -f $(STACK_DIR)/stack.json ]; then $(DENO) task stack down --dir $(STACK_DIR); fi
	@if [ -f $(DEMO_DIR)/stack.json ]; then $(DENO) task stack down --dir $(DEMO_DIR); fi
	rm -rf wasm/build .state
