//go:build !unix

package lemonade

// openNoBlock: systems without FIFOs need no flag.
const openNoBlock = 0
