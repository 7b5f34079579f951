module github.com/zestmcp/zest/services/toolhost

go 1.26.0
