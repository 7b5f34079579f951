module github.com/zestmcp/zest/services/mcpgateway

go 1.26.0
