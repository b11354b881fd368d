module sluice.dev/server

go 1.26
