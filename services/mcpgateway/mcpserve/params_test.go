package mcpserve

import (
	"bytes"
	"testing"
)

// Params answers what decoding the message it is given says: the params CheckMessage kept
// serve only the very bytes they were decoded from, never a rewritten copy of the request.
func TestParamsOfTheMessageGiven(t *testing.T) {
	for _, tc := range []struct {
		name, payload, want, bad string
	}{
		{name: "object", payload: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, want: `{"name":"echo"}`},
		{name: "absent", payload: `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{name: "null", payload: `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`},
		{name: "duplicate member, the last wins", payload: `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1},"params":{"b":2}}`, want: `{"b":2}`},
		{name: "not an object", payload: `{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}`, bad: `the params of x must be an object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := []byte(tc.payload)
			msg, _, problem := CheckMessage(payload)
			if problem != "" {
				t.Fatal(problem)
			}
			// The same bytes, and an equal copy decoded anew, give the same answer.
			for _, in := range [][]byte{payload, bytes.Clone(payload)} {
				params, bad := Params(in, msg)
				if tc.bad != "" {
					if !bytes.Contains(bad, []byte(tc.bad)) {
						t.Fatalf("Params(%s) = %s, want an error saying %q", in, bad, tc.bad)
					}
					continue
				}
				if bad != nil || string(params) != tc.want {
					t.Fatalf("Params(%s) = %s, %s; want %s", in, params, bad, tc.want)
				}
			}
		})
	}
	// A request rewritten after the check (its params changed) gets the new params.
	orig := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"k":1}}}`)
	msg, _, _ := CheckMessage(orig)
	rewritten := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	if params, bad := Params(rewritten, msg); bad != nil || string(params) != `{"name":"echo"}` {
		t.Fatalf("Params of the rewritten request = %s, %s; want its own params", params, bad)
	}
	// A shorter slice of the same memory (here not even JSON) is decoded, not taken for the
	// message that was checked.
	if params, bad := Params(orig[:len(orig)-1], msg); bad == nil {
		t.Fatalf("Params of a truncated message = %s, want an error", params)
	}
}
