module github.com/zestmcp/zest/docs/user

go 1.26.0
