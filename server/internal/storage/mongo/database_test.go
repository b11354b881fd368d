package mongo_test

import (
	"context"
	"net/url"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/testutil"
)

// TestDatabaseName: the path of a connection string is a data database only
// when it is not one of MongoDB's system databases.
func TestDatabaseName(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"mongodb://h:27017", "sluice"},
		{"mongodb://h:27017/", "sluice"},
		{"mongodb://h:27017/queues", "queues"},
		{"mongodb://u:p@h-0.svc:27017,h-1.svc:27017/admin?replicaSet=rs&ssl=false", "sluice"},
		{"mongodb://h/local", "sluice"},
		{"mongodb://h/config", "sluice"},
		{"mongodb://h/admins", "admins"},
		{"mongodb+srv://u:p@cluster.example/admin?authSource=admin", "sluice"},
	} {
		u, err := url.Parse(tc.uri)
		if err != nil {
			t.Fatal(err)
		}
		if got := mongo.DatabaseName(u); got != tc.want {
			t.Errorf("DatabaseName(%s) = %q, want %q", tc.uri, got, tc.want)
		}
	}
}

// TestAdminPathKeepsQueuesOutOfAdmin opens a pool the way the MongoDB
// community operator's connection string names it (".../admin") and checks
// where the queue document lands.
func TestAdminPathKeepsQueuesOutOfAdmin(t *testing.T) {
	f := testutil.StartFerretDB(t)
	u, _ := url.Parse(f.URI("admin"))
	d, err := mongo.Open(context.Background(), u, storage.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer d.Close()
	ctx := context.Background()
	if _, err := d.Queues().Create(ctx, storage.QueueRef{Project: "p", Name: "q1"}, storage.Metadata{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	c, err := driver.Connect(options.Client().ApplyURI(f.URI("")))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Disconnect(ctx) }()
	count := func(db string) int64 {
		n, err := c.Database(db).Collection("queues").CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatalf("count %s.queues: %v", db, err)
		}
		return n
	}
	if got := count(mongo.DefaultDatabase); got != 1 {
		t.Errorf("%s.queues holds %d documents, want 1", mongo.DefaultDatabase, got)
	}
	if got := count("admin"); got != 0 {
		t.Errorf("admin.queues holds %d documents, want 0", got)
	}
}
