module sluice.dev/e2e/noop

go 1.24
