package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"sluice.dev/server/internal/storage"
)

// Depth totals live messages over every queue, for the scrape-time gauge.
func (d *Driver) Depth(ctx context.Context) (storage.Depth, error) {
	const op = "mongo.depth"
	now := d.now()
	total, err := d.messages.CountDocuments(ctx, bson.D{alive(now)})
	if err != nil {
		return storage.Depth{}, wrap(op, err)
	}
	claimed, err := d.messages.CountDocuments(ctx, bson.D{alive(now),
		{Key: "cl", Value: bson.M{"$ne": ""}}, {Key: "ce", Value: bson.M{"$gt": now}}})
	if err != nil {
		return storage.Depth{}, wrap(op, err)
	}
	return storage.Depth{Free: total - claimed, Claimed: claimed}, nil
}

// Leftovers lists what the driver still stores for a project: queue,
// message, claim and lock documents, expired or not, and records a move
// left.
func (d *Driver) Leftovers(ctx context.Context, project string) ([]string, error) {
	var out []string
	for _, c := range []*mongo.Collection{d.queues, d.messages, d.claims, d.locks, d.subs, d.deliveries, d.dstats, d.imported} {
		cur, err := c.Find(ctx, bson.M{"p": project}, options.Find().SetLimit(20))
		if err != nil {
			return nil, wrap("mongo.leftovers", err)
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			return nil, wrap("mongo.leftovers", err)
		}
		for _, doc := range docs {
			out = append(out, fmt.Sprintf("%s: %v", c.Name(), doc))
		}
	}
	return out, nil
}
