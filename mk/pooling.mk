# Pooling, the catalog and the MongoDB driver (server/internal/storage/{mongo,
# pooling,catalog}). The MongoDB-protocol tests run against FerretDB built from
# the Go module proxy (SQLite backend), cached by its pinned version.
APT_PACKAGES += redis-server
# test-server runs `go test ./...` over the whole server module, these
# packages included; deps builds FerretDB first so that run finds it.
BENCH_TARGETS += bench-pooling

# The pin lives in one place: the wrapper module's go.mod.
FERRETDB_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/FerretDB/FerretDB") print $$(i+1)}' $(ROOT)/server/tools/ferretdb/go.mod | head -1)
FERRETDB_BIN     := $(CACHE)/ferretdb-$(FERRETDB_VERSION)/ferretdb
export SLUICE_FERRETDB_BIN := $(FERRETDB_BIN)

POOLING_PKGS := ./internal/storage/mongo/... ./internal/storage/catalog/... ./internal/storage/pooling/...

.PHONY: ferretdb test-pooling bench-pooling
deps: ferretdb

ferretdb: $(FERRETDB_BIN) ## build FerretDB (pinned in server/tools/ferretdb/go.mod) into the cache

# Rebuilt only when the pinned version (and so the path) changes.
$(FERRETDB_BIN):
	@mkdir -p $(dir $@)
	cd server/tools/ferretdb && CGO_ENABLED=0 $(GO) build -trimpath -o $@.tmp .
	mv $@.tmp $@

test-pooling: deps-apt ferretdb ## MongoDB driver on FerretDB, catalog, pooled driver over 3 redis-servers + FerretDB
	cd server && $(GO) vet $(POOLING_PKGS) && $(GO) test -race -count=1 -p 2 $(POOLING_PKGS)

bench-pooling: deps-apt ## routing cost (memory direct vs pooled), one Redis direct vs pooled, 1/2/4 Redis pools
	cd server && $(GO) test -run '^$$' -bench 'Routing|Direct|Pooled|PoolsScaling' -benchtime 2s -count 3 ./internal/storage/pooling/ \
	  | grep -v '^redis: ' | tee $(BUILD)/bench-pooling.txt
