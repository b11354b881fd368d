package storage

// Operation names, the op of every *Error a store method returns and the
// op label of its metrics: one table, so a condition reads the same
// whichever driver reports it.
const (
	OpQueueCreate         = "queues.create"
	OpQueueExists         = "queues.exists"
	OpQueueGetMetadata    = "queues.get_metadata"
	OpQueueSetMetadata    = "queues.set_metadata"
	OpQueueUpdateMetadata = "queues.update_metadata"
	OpQueueDelete         = "queues.delete"
	OpQueueList           = "queues.list"
	OpQueueStats          = "queues.stats"
	OpQueuePurge          = "queues.purge"
	OpMessagePost         = "messages.post"
	OpMessageList         = "messages.list"
	OpMessageGet          = "messages.get"
	OpMessageGetMany      = "messages.get_many"
	OpMessageDelete       = "messages.delete"
	OpMessageDeleteMany   = "messages.delete_many"
	OpMessagePop          = "messages.pop"
	OpClaimCreate         = "claims.create"
	OpClaimGet            = "claims.get"
	OpClaimUpdate         = "claims.update"
	OpClaimDelete         = "claims.delete"

	OpSubscriptionCreate  = "subscriptions.create"
	OpSubscriptionGet     = "subscriptions.get"
	OpSubscriptionList    = "subscriptions.list"
	OpSubscriptionUpdate  = "subscriptions.update"
	OpSubscriptionConfirm = "subscriptions.confirm"
	OpSubscriptionDelete  = "subscriptions.delete"
	OpSubscriptionPurge   = "subscriptions.purge"
	OpDeliveryLease       = "deliveries.lease"
	OpDeliveryAck         = "deliveries.ack"
	OpDeliveryRetry       = "deliveries.retry"
	OpDeliveryFail        = "deliveries.fail"
	OpDeliveryRelease     = "deliveries.release"
	OpDeliveryStats       = "deliveries.stats"
	OpDeliveryPending     = "deliveries.pending"
)

// Operation names of a move's steps (migrate.go).
const (
	OpMigrateSeal             = "migrate.seal"
	OpMigrateUnseal           = "migrate.unseal"
	OpMigrateTake             = "migrate.take"
	OpMigrateSettle           = "migrate.settle"
	OpMigrateFinish           = "migrate.finish"
	OpMigratePrepare          = "migrate.prepare"
	OpMigrateImport           = "migrate.import"
	OpMigrateDone             = "migrate.done"
	OpMigrateInTransit        = "migrate.in_transit"
	OpMigrateDeliveries       = "migrate.deliveries"
	OpMigrateImportDeliveries = "migrate.import_deliveries"
	OpMigrateImportCounts     = "migrate.import_delivery_counts"
	OpMigrateStorageID        = "migrate.storage_id"
)
