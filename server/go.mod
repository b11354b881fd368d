module sluice.dev/server

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/redis/go-redis/v9 v9.17.0 // indirect
	go.mongodb.org/mongo-driver/v2 v2.3.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
