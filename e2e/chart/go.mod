// Tests of charts/sluice: lint, rendering, schema, CRD and RBAC sync, the
// README values table, and the alert rules (promtool and a real Prometheus
// scraping a real sluice-server).
module sluice.dev/e2e/chart

go 1.25

require gopkg.in/yaml.v3 v3.0.1
