# `sudo make test` is the one command that runs every test: it installs what
# the tests need (scripts/setup.sh), then checks formatting, vets and tests.
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
GOFMT ?= $(dir $(GO))gofmt

.PHONY: build test setup
build:
	$(GO) build -o bin/codecell ./cmd/codecell

setup:
	scripts/setup.sh

# The official TypeScript MCP SDK, which the MCP tests drive codecell with.
MCPCLIENT := cmd/codecell/testdata/mcpclient

test: setup
	cd $(MCPCLIENT) && npm ci --no-audit --no-fund --loglevel=error
	@test -z "$$($(GOFMT) -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; $(GOFMT) -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	CODECELL_TEST_PYTHON_MODE=spawn $(GO) test -count=1 -timeout 30m ./internal/sandbox/ ./internal/api/
	# Short fuzz runs of request decoding and of the file plane's paths.
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz '^FuzzResolve$$' -fuzztime 30s ./internal/files/
