// Package docs holds no code: it is the package of the documentation's tests
// (reference_test.go), which hold the reference tables of docs/operator and the package map of
// docs/dev to the code they describe, so that a setting, a metric, an admin route or a package
// cannot be added or removed without its documentation.
package docs
