package federate

import (
	"context"
	"testing"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

type recordStream struct {
	sent []*mcpgatewayv1.ExchangeResponse
}

func (r *recordStream) Send(m *mcpgatewayv1.ExchangeResponse) error {
	r.sent = append(r.sent, m)
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
	if len(rec.sent) != 2 || !rec.sent[1].GetFinal() {
		t.Fatalf("sent %v, want the first note and the answer, last", rec.sent)
	}
}
