package user

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPagesAreTheFilesBundled: every bundled page lists with its first heading and its size,
// reads back as the file in docs/user, and an id that is not a bundled page reads nothing.
func TestPagesAreTheFilesBundled(t *testing.T) {
	pages := Pages()
	if len(pages) != 4 {
		t.Fatalf("Pages() = %v; want the 4 pages go:embed names", pages)
	}
	for _, p := range pages {
		md, ok := Read(p.ID)
		if !ok {
			t.Fatalf("Read(%q) found nothing", p.ID)
		}
		disk, err := os.ReadFile(filepath.Base(p.ID) + ".md")
		if err != nil {
			t.Fatal(err)
		}
		if md != string(disk) || p.Bytes != len(disk) {
			t.Errorf("%s: %d bytes read, %d listed, %d on disk", p.ID, len(md), p.Bytes, len(disk))
		}
		if p.Title == "" || !strings.Contains(string(disk), "# ") {
			t.Errorf("%s has no title", p.ID)
		}
	}
	for _, id := range []string{"", "user/", "lemonade", "user/console", "user/../user/lemonade", "user/x/lemonade", "dev/layout"} {
		if _, ok := Read(id); ok {
			t.Errorf("Read(%q) found a page", id)
		}
	}
}
