package federate

import (
	"context"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/mcpserve/mcpservetest"
)

// recordStream records what an exchange writes.
type recordStream struct {
	sent []*mcpservetest.Item
}

func (r *recordStream) Session(id, _ string) error { return r.add(&mcpservetest.Item{Session: id}) }
func (r *recordStream) Message(msg []byte) error   { return r.add(&mcpservetest.Item{Message: msg}) }
func (r *recordStream) Final(msg []byte, status int) error {
	return r.add(&mcpservetest.Item{Message: msg, Final: true, Status: status})
}
func (r *recordStream) add(it *mcpservetest.Item) error {
	r.sent = append(r.sent, it)
	return nil
}
func (r *recordStream) Context() context.Context { return context.Background() }

// A progress note that arrives after the answer (an HTTP upstream's stream reader may hand
// it over just as the call returns) is dropped: nothing follows the final item.
func TestNoNoteAfterTheAnswer(t *testing.T) {
	rec := &recordStream{}
	o := &output{stream: rec}
	o.note([]byte(`{"method":"notifications/progress","params":{"progress":1}}`))
	if err := o.final([]byte(`{"result":{}}`)); err != nil {
		t.Fatal(err)
	}
	o.note([]byte(`{"method":"notifications/progress","params":{"progress":2}}`))
	if len(rec.sent) != 2 || !rec.sent[1].Final {
		t.Fatalf("sent %v, want the first note and the answer, last", rec.sent)
	}
}
