// Package deploy holds no code: it is the Go module of the deployment files' tests
// (compose_test.go and compose_ha_test.go for compose.yaml and compose.ha.yaml, k8s_test.go
// and k8s_ha_test.go for the kustomize base and overlays) and of the deployables' shape
// (boundaries_test.go for what each links, construction_test.go for how its parts are built),
// so that compose-go, kustomize and the Kubernetes types stay out of the product's module
// (TestProductModuleGraph).
package deploy
