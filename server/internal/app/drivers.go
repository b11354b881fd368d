package app

// The storage drivers sluice-server can open, all registered here: each
// registers its URI scheme (memory, redis/rediss, mongodb) with storage's
// factory table when imported. A store or a pool URI of any of these
// schemes works; the catalog opens its own store with the drivers' client
// builders.
import (
	_ "sluice.dev/server/internal/storage/memory"
	_ "sluice.dev/server/internal/storage/mongo"
	_ "sluice.dev/server/internal/storage/redis"
)
