module github.com/zestmcp/zest/e2e

go 1.26.0

require go.yaml.in/yaml/v3 v3.0.5
