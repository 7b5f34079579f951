module github.com/zestmcp/zest/services/inference

go 1.26.0

require (
	github.com/zestmcp/zest/lib v0.0.0-00010101000000-000000000000
	github.com/zestmcp/zest/proto v0.0.0-00010101000000-000000000000
	go.yaml.in/yaml/v3 v3.0.5
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261104224025-d1e00e9f33ab
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace (
	github.com/zestmcp/zest/lib => ../../lib
	github.com/zestmcp/zest/proto => ../../proto
)
