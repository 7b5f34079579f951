package stdio

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestTailKeepsTheLastBytes(t *testing.T) {
	for _, n := range []int{1, 7, 64} {
		for _, sizes := range [][]int{{3}, {5, 5, 5}, {100}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {63, 2}, {64, 64, 1}} {
			t.Run(fmt.Sprint(n, sizes), func(t *testing.T) {
				tl := newTail(n)
				var all []byte
				for i, sz := range sizes {
					p := bytes.Repeat([]byte{byte('a' + i%26)}, sz)
					for j := range p {
						p[j] += byte(j % 2) // vary bytes within a write too
					}
					tl.Write(p)
					all = append(all, p...)
				}
				want := string(all[max(0, len(all)-n):])
				if got := tl.String(); got != want {
					t.Fatalf("tail = %q, want %q", got, want)
				}
			})
		}
	}
	if got := newTail(0); got.String() != "" {
		t.Fatal("empty tail")
	}
	tl := newTail(0)
	tl.Write([]byte("x"))
	if tl.String() != "" {
		t.Fatal("a tail of 0 bytes keeps nothing")
	}
}

// BenchmarkTailWrite: the stderr tail (16 KiB) fed as stderrLoop feeds it, by reads of a
// chatty child's lines (80 bytes) and of a full read buffer (4 KiB).
func BenchmarkTailWrite(b *testing.B) {
	for _, size := range []int{80, 4096} {
		b.Run(fmt.Sprint(size, "B"), func(b *testing.B) {
			tl := newTail(DefaultStderrTailBytes)
			p := []byte(strings.Repeat("x", size-1) + "\n")
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				tl.Write(p)
			}
		})
	}
}
