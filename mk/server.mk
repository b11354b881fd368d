# sluice-server: the Zaqar v2 data plane (Go module in server/).
APT_PACKAGES  += redis-server
TEST_TARGETS  += test-server

.PHONY: build-server test-server
build-server: ## build sluice-server into build/bin
	@mkdir -p $(BIN)
	cd server && $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/sluice-server ./cmd/sluice-server

test-server: deps-apt ## unit, conformance (memory + real redis-server) and HTTP API tests
	cd server && $(GO) vet ./... && $(GO) test -race -count=1 ./...
