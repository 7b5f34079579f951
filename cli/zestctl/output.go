package zestctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/zestmcp/zest/lib/adminjson"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// pj marshals messages with the contracts' field names (snake_case, the same rule for every
// service: the chat contract has no JSON names of its own), every field present so that
// scripts find the same keys every time.
var pj = protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true}

// plain turns a message into plain JSON values (for yaml, and to embed in a larger document),
// in the admin API's shape (lib/adminjson): a server's state one flat object, as the edge
// writes it.
func plain(m proto.Message) any {
	b, err := pj.Marshal(m)
	if err == nil {
		b, err = adminjson.Shape(m.ProtoReflect().Descriptor(), b)
	}
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// plainList is plain over a list of messages.
func plainList[M proto.Message](ms []M) []any {
	out := make([]any, 0, len(ms))
	for _, m := range ms {
		out = append(out, plain(m))
	}
	return out
}

// emit prints v (a message or plain JSON values) as --output says; table prints it for people.
func (a *app) emit(v any, table func(w io.Writer)) error {
	if m, ok := v.(proto.Message); ok {
		v = plain(m)
	}
	switch a.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", b)
		return err
	case "yaml":
		return writeYAML(a.stdout, v)
	}
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

func writeYAML(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	enc.Close()
	_, err := w.Write(buf.Bytes())
	return err
}

// cell makes a value fit one table cell: one line, at most 60 characters.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

// row prints tab-separated cells.
func row(w io.Writer, cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = cell(fmt.Sprint(c))
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// spinner shows that a long operation is under way, on stderr, only when stderr is a
// terminal (never in scripts or tests, whose stderr is a pipe or a file).
type spinner struct {
	stop chan struct{}
	done sync.WaitGroup
}

func (a *app) spin(label string) *spinner {
	s := &spinner{}
	f, ok := a.stderr.(*os.File)
	if !ok {
		return s
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return s
	}
	s.stop = make(chan struct{})
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(f, "\r%c %s", frames[i%len(frames)], label)
			select {
			case <-s.stop:
				fmt.Fprintf(f, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop clears the spinner's line; it may be called more than once.
func (s *spinner) Stop() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	s.done.Wait()
	s.stop = nil
}
