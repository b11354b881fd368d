package mongo

import (
	"net/url"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Defaults for what the URI leaves unsaid. A server that is down must turn
// into a quick 503, not the driver's 30 s hang; writes are acknowledged by
// a majority so a failover does not lose them.
const (
	defaultServerSelectionTimeout = 3 * time.Second
	defaultConnectTimeout         = 3 * time.Second
)

// ClientOptions are the client options for a mongodb:// URI: the URI's own
// options (TLS with tlsCAFile, auth, replicaSet, ...) plus sluice's defaults
// for w, serverSelectionTimeoutMS and connectTimeoutMS when it does not set
// them. An invalid URI is an error.
func ClientOptions(u *url.URL) (*options.ClientOptions, error) {
	q := u.Query()
	co := options.Client().ApplyURI(u.String())
	if err := co.Validate(); err != nil {
		return nil, err
	}
	if !q.Has("w") {
		co.SetWriteConcern(writeconcern.Majority())
	}
	if !q.Has("serverSelectionTimeoutMS") {
		co.SetServerSelectionTimeout(defaultServerSelectionTimeout)
	}
	if !q.Has("connectTimeoutMS") {
		co.SetConnectTimeout(defaultConnectTimeout)
	}
	return co, nil
}

// Connect is the one way sluice opens a MongoDB URI: the store driver and
// the pooling catalog both call it, so a URI means the same client whichever
// role it plays. Like mongo.Connect it does not wait for the server.
func Connect(u *url.URL) (*mongo.Client, error) {
	co, err := ClientOptions(u)
	if err != nil {
		return nil, err
	}
	return mongo.Connect(co)
}
