# Museum Art Data — the two front-door commands are `make run` and `make test`.
SHELL := /bin/bash
# Run as an operator runs it (npx museum): bin/museum passes node the server's flags.
MUSEUM := ./bin/museum
export DATA_DIR ?= data
export STATE_DB ?= state/museum.db
CONTENT_DIR ?= content

# VITEST_ARGS: passed to vitest by `make test` and `make test-node24` (files to run, reporters).
VITEST_ARGS ?=

.PHONY: run test test-node24 install build deps sample bake serve typecheck lint unused client bench bench-bake bench-slots bench-serve bench-upstreams bench-presence bench-viewer bench-publish bench-soak screenshots clean

# Install npm packages (lockfile-exact) and the few Debian packages the project uses.
install: node_modules/.install-stamp
node_modules/.install-stamp: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@
# Bundle the CLI and the viewer into dist/ when a source changed (bin/museum.js and the pages refuse a stale one).
SOURCES := $(shell find artifacts bake cli common server viewer -name '*.ts' -o -name '*.mjs' -o -name '*.css') scripts/build.mjs scripts/viewer-build.mjs package-lock.json
build: dist/build.json
dist/build.json: $(SOURCES) | node_modules/.install-stamp
	MUSEUM_BUILD_STRICT=1 node scripts/build.mjs
deps: install
	bash scripts/system-deps.sh

# Generate the sample content (deterministic, no network) unless a content source exists.
sample: build
	@if [ ! -f $(CONTENT_DIR)/rooms.json ]; then $(MUSEUM) bake sample --out $(CONTENT_DIR); fi

# Bake every room of the content source into DATA_DIR (incremental).
bake: sample
	$(MUSEUM) bake rooms --content $(CONTENT_DIR) --out $(DATA_DIR)

serve: build
	$(MUSEUM) serve --dev-key

# Install, bake the sample rooms, serve, and print a development key.
run: deps bake serve

# Regenerate the typed client's types (client/schema.d.ts) from the OpenAPI document the server code produces.
client: install
	npx tsx scripts/generate-client.ts

typecheck: install
	npx tsc --noEmit -p .
	npx tsc --noEmit -p viewer

# Formatting and lint rules (biome.json); `npx biome check --write .` applies the safe fixes.
lint: install
	npx biome check .
# Unused exports, files and dependencies (knip.json); not part of `make test`.
unused: install
	npx knip

# Install and pass the tests (the CLI tests run the bundled CLI, as shipped).
test: deps build lint
	npx tsc --noEmit -p .
	npx tsc --noEmit -p viewer
	npx vitest run $(VITEST_ARGS)

# The vitest suite on Node 24 LTS, as CI runs it after `make test` (scripts/node24.sh: Node 24 from the npm
# registry, cached; its own install tree .node24/, since better-sqlite3 is built per Node ABI: node_modules stays Node 20's).
test-node24:
	bash scripts/system-deps.sh
	bash scripts/node24.sh test $(VITEST_ARGS)

bench: bench-bake bench-slots bench-serve bench-upstreams bench-presence bench-viewer
bench-bake: install
	npx tsx bench/bake.ts
bench-slots: install
	npx tsx bench/slots.ts
bench-serve: build
	npx tsx bench/serve.ts
bench-upstreams: install
	npx tsx bench/upstreams.ts
bench-presence: install
	npx tsx bench/presence.ts
bench-viewer: build
	npx tsx bench/viewer.ts
# README pictures of the model variants side by side and of a QA report plan (scripts/screenshots.ts).
screenshots: build
	npx tsx scripts/screenshots.ts
bench-publish: build
	npx tsx bench/publish.ts
# What held in issue 43's attack round: acknowledged writes through kill -9, aborted downloads, presence backpressure, hostile input, a soak.
bench-soak: build
	npx tsx bench/soak.ts

clean:
	rm -rf $(DATA_DIR)/files $(DATA_DIR)/cache $(DATA_DIR)/manifest.json $(DATA_DIR)/report.html $(CONTENT_DIR)
