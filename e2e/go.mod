module github.com/zestmcp/zest/e2e

go 1.26.0
