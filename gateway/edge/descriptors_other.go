//go:build !unix

package edge

// openFileLimit is unknown here: the streams are bounded by their settings alone.
func openFileLimit() int { return 0 }
