# Moving a queue between pools (docs/pooling.md, "Moving a queue"): its
# benchmark. The tests run with the pooling, catalog and api packages.
BENCH_TARGETS += bench-migrate

.PHONY: bench-migrate

bench-migrate: deps-apt ## messages moved per second between two Redis pools (1 KiB), client p99 before and during the move
	cd server && $(GO) test -run '^$$' -bench 'Migrate' -benchtime 1x -count 3 ./internal/storage/pooling/ \
	  | grep -v '^redis: ' | tee $(BUILD)/bench-migrate.txt
