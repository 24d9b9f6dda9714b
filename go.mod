module github.com/bulkhead-go/bulkhead

go 1.26

require (
	github.com/panjf2000/ants/v2 v2.12.1 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sync v0.25.0 // indirect
)
