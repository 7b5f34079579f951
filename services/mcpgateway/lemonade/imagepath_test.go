package lemonade

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// sandbox is LEMONADE_MCP_IMAGE_DIR with traps around it, for FuzzImagePath:
//
//	base/
//	  outside/                 nothing here may ever be written, created or removed
//	    x.png                  a file a write through a symlink would overwrite
//	    victim.png             another
//	  a/b/images/              the image directory
//	    escape   → base/outside (absolute symlink)
//	    up       → ../../..     (relative symlink leading out, to base)
//	    upfile   → ../../../outside/x.png
//	    victim   → base/outside/victim.png (absolute symlink to a file)
//	    loop     → loop
//	    inner    → sub          (a symlink that stays inside)
//	    sub/
type sandbox struct{ base, images string }

func newSandbox(tb testing.TB) *sandbox {
	tb.Helper()
	base, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	s := &sandbox{base: base, images: filepath.Join(base, "a", "b", "images")}
	for _, d := range []string{filepath.Join(base, "outside"), filepath.Join(s.images, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for _, name := range []string{"x.png", "victim.png"} {
		if err := os.WriteFile(filepath.Join(base, "outside", name), []byte("keep "+name), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"escape": filepath.Join(base, "outside"), "up": "../../..", "upfile": "../../../outside/x.png",
		"victim": filepath.Join(base, "outside", "victim.png"), "loop": "loop", "inner": "sub",
	} {
		if err := os.Symlink(target, filepath.Join(s.images, link)); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// outsideEntries maps every path under base that is not inside the image directory to what
// it is: a directory, a symlink and its target, or a file and its contents and mode.
func (s *sandbox) outsideEntries(tb testing.TB) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case p == s.images:
			return filepath.SkipDir
		case d.IsDir():
			out[p] = "directory"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[p] = "symlink to " + target
			return err
		default:
			info, err := d.Info()
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			out[p] = fmt.Sprintf("file %v %q", info.Mode(), b)
			return err
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// within reports whether p, resolved through every symlink, lies inside the image directory.
func (s *sandbox) within(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(s.images, real)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// FuzzImagePath: whatever output_path or output_dir a client sends, lemonade_generate_image
// either writes inside LEMONADE_MCP_IMAGE_DIR (every file it reports is there, symlinks
// resolved) or refuses with an isError result; nothing appears anywhere else, and it never
// panics. "{root}" in an input stands for the image directory's absolute path.
func FuzzImagePath(f *testing.F) {
	for _, seed := range []struct {
		path string
		dir  bool
	}{
		{"lemon.png", false}, {"fruit/lemon.png", false}, {"batch", true}, {"", true},
		{"..", false}, {"../x.png", false}, {"../../../outside/x.png", false}, {"a/../../x.png", false}, {"..", true},
		{"/etc/x.png", false}, {"/", true}, {"{root}/abs.png", false}, {"{root}/../x.png", false}, {"{root}", true}, {"{root}/../../../outside", true},
		{"escape/x.png", false}, {"escape", true}, {"up/outside/x.png", false}, {"up", true}, {"upfile", false},
		{"victim", false}, {"{root}/victim", false}, {"escape/victim.png", false}, {"up/outside/victim.png", false},
		{"loop/x.png", false}, {"inner/x.png", false}, {"inner", true}, {"sub/../inner/../escape/x.png", false},
		{"x\x00.png", false}, {"\x00", true}, {"sub/\x00/x.png", false},
		{strings.Repeat("a", 255) + ".png", false}, {strings.Repeat("a", 300), true}, {strings.Repeat("d/", 300) + "x.png", false},
		{".", false}, {"./", true}, {"sub/", false}, {"//x.png", false}, {"\\..\\x.png", false}, {"~/x.png", false},
		{"%2e%2e/x.png", false}, {"sub/./../../x.png", false}, {"C:\\x.png", false}, {"é/ü.png", false}, {"\xff\xfe.png", false},
	} {
		f.Add(seed.path, seed.dir)
	}
	s := newSandbox(f)
	tools := New(&media{models: models{list: []*inferencev1.Model{model("img", inferencev1.ModelType_MODEL_TYPE_IMAGE, loaded)}}}, nil,
		Dirs{Images: s.images, Audio: filepath.Join(s.base, "audio")})
	f.Fuzz(func(t *testing.T, p string, dir bool) {
		p = strings.ReplaceAll(p, "{root}", s.images)
		args := map[string]any{"prompt": "x", "output_path": p}
		if dir {
			args = map[string]any{"prompt": "x", "output_dir": p, "n": 2}
		}
		before := s.outsideEntries(t)
		res, err := tools.generateImage(t.Context(), callArgs(args))
		if err != nil || res == nil {
			t.Fatalf("%q: no result (%v)", p, err)
		}
		if got := s.outsideEntries(t); !maps.Equal(got, before) {
			t.Fatalf("%q (dir %v) changed what lies outside the image directory:\n got %q\nwant %q", p, dir, got, before)
		}
		if res.IsError {
			return
		}
		if p == "" {
			return // neither output_path nor output_dir: the images come back inline
		}
		files := pathsOf(t, res)
		if len(files) == 0 {
			t.Fatalf("%q: success without files: %s", p, text(res))
		}
		for _, file := range files {
			if !s.within(file) {
				t.Fatalf("%q: wrote %s, outside %s", p, file, s.images)
			}
		}
	})
}
