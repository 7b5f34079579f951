package metrics

import (
	"strings"
	"sync"
)

// DefaultMaxLabelSets is how many distinct values of the capped labels a metric keeps
// before it counts new ones as Other: servers and tools are registered by administrators,
// so their number is bounded, but nothing else bounds it.
const DefaultMaxLabelSets = 1000

// Other is the value that stands for every label set past a cap.
const Other = "other"

// Cap bounds the label sets a metric family may grow to. Values gives the label values to use:
// the ones given, while they are among the first Max distinct sets of the capped labels (or
// were seen before), else Other in each capped label (the uncapped labels, bounded by the
// code, keep their values). A Cap is safe for concurrent use.
type Cap struct {
	max    int
	capped []bool // per label position
	mu     sync.Mutex
	seen   map[string]struct{}
	over   bool
}

// NewCap caps the labels at the positions where capped is true to max distinct sets
// (DefaultMaxLabelSets when max <= 0).
func NewCap(max int, capped ...bool) *Cap {
	if max <= 0 {
		max = DefaultMaxLabelSets
	}
	return &Cap{max: max, capped: capped, seen: map[string]struct{}{}}
}

// Values returns the label values to record for vals (vals itself when under the cap).
func (c *Cap) Values(vals ...string) []string {
	var key strings.Builder
	for i, v := range vals {
		if i < len(c.capped) && c.capped[i] {
			key.WriteString(v)
			key.WriteByte(0)
		}
	}
	k := key.String()
	c.mu.Lock()
	_, ok := c.seen[k]
	if !ok && len(c.seen) < c.max {
		c.seen[k], ok = struct{}{}, true
	}
	if !ok {
		c.over = true
	}
	c.mu.Unlock()
	if ok {
		return vals
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		if i < len(c.capped) && c.capped[i] {
			v = Other
		}
		out[i] = v
	}
	return out
}

// Len is the number of distinct capped label sets kept (at most the cap).
func (c *Cap) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Forget drops the capped label set of vals, so that its place can be taken by another (when
// the metric's series for it are deleted too).
func (c *Cap) Forget(vals ...string) {
	var key strings.Builder
	for i, v := range vals {
		if i < len(c.capped) && c.capped[i] {
			key.WriteString(v)
			key.WriteByte(0)
		}
	}
	c.mu.Lock()
	delete(c.seen, key.String())
	c.mu.Unlock()
}
