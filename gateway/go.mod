module github.com/zestmcp/zest/gateway

go 1.26.0
