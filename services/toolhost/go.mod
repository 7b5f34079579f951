module github.com/zestmcp/zest/services/toolhost

go 1.26.0

require (
	github.com/zestmcp/zest/lib v0.0.0-00010101000000-000000000000
	github.com/zestmcp/zest/proto v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.49.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261104224025-d1e00e9f33ab // indirect
)

replace (
	github.com/zestmcp/zest/lib => ../../lib
	github.com/zestmcp/zest/proto => ../../proto
)
