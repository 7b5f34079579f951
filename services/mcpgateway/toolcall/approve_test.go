package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/proto"
)

// asker is an MCP client's approver: it records what it was told and asked; decide, when
// set, answers an elicitation at once (the session era); modern answers with an
// input_required result instead.
type asker struct {
	canDecide bool
	modern    bool
	decide    func(a *mcpgatewayv1.Approval)

	mu           sync.Mutex
	held, asked  []*mcpgatewayv1.Approval
	onHeldDecide func(a *mcpgatewayv1.Approval)
}

func (k *asker) Held(_ context.Context, a *mcpgatewayv1.Approval) {
	k.mu.Lock()
	k.held = append(k.held, a)
	f := k.onHeldDecide
	k.mu.Unlock()
	if f != nil {
		go f(a)
	}
}

func (k *asker) ClientCanDecide() bool { return k.canDecide }

func (k *asker) AskClient(_ context.Context, a *mcpgatewayv1.Approval) []byte {
	k.mu.Lock()
	k.asked = append(k.asked, a)
	k.mu.Unlock()
	if k.modern {
		return []byte(`{"resultType":"input_required","requestState":"` + a.GetId() + `"}`)
	}
	go k.decide(a)
	return nil
}

// TestApprovalByAdminHoldsEveryPath: a server whose approval_by is admin (the default)
// holds the call on every entry point, tells the caller, never asks the client — an MCP
// client that could approve itself is not asked — and runs it only once the admin key
// approves it; a denial says so and nothing runs.
func TestApprovalByAdminHoldsEveryPath(t *testing.T) {
	f := newFixture(t, server("sh", func(c *mcpgatewayv1.ServerConfig) { c.Approval = proto.String(serverconfig.ApprovalRequired) }))
	admin := as(context.Background(), "admin-key")
	for _, approve := range []bool{true, false} {
		for _, e := range Entries {
			if e == EntryMCP {
				continue // the built-in tools have no approval
			}
			k := &asker{canDecide: true, onHeldDecide: func(a *mcpgatewayv1.Approval) {
				if _, err := f.gate.Decide(admin, a.GetId(), approve, "reviewed"); err != nil {
					t.Error(err)
				}
			}}
			before := len(f.up.dispatched())
			_, err := f.p.Invoke(as(t.Context(), "api-key"), &Call{Entry: e, Server: "sh", Tool: "exec", Params: params("exec", `{"cmd":"echo harmless"}`), Approver: k})
			ran := len(f.up.dispatched()) - before
			if len(k.held) != 1 || len(k.asked) != 0 || k.held[0].GetApprovalBy() != serverconfig.ApprovalByAdmin ||
				k.held[0].GetArgumentsSha256() != ArgumentsHash(json.RawMessage(`{"cmd":"echo harmless"}`)) {
				t.Fatalf("%s: held %v, asked %v", e, k.held, k.asked)
			}
			var refused *ApprovalError
			switch {
			case approve && (err != nil || ran != 1):
				t.Fatalf("%s approved: ran %d, %v", e, ran, err)
			case !approve && (!errors.As(err, &refused) || refused.State != registry.ApprovalDenied || ran != 0 ||
				!strings.Contains(refused.Text, "an administrator denied it (approval_denied): reviewed")):
				t.Fatalf("%s denied: ran %d, %v", e, ran, err)
			}
		}
	}
}

// TestApprovalByClient: with approval_by client an MCP client that can be asked decides (its
// elicitation's answer, or its retry's), one that cannot is refused at once, and entry points
// without a client (a chat, the admin API) wait for an administrator.
func TestApprovalByClient(t *testing.T) {
	f := newFixture(t, server("sh", func(c *mcpgatewayv1.ServerConfig) {
		c.ApprovalTools, c.ApprovalBy = []string{"exec"}, proto.String(serverconfig.ApprovalByClient)
	}))
	call := func(k Approver, args string) (json.RawMessage, error) {
		return f.p.Invoke(as(t.Context(), "api-key"), &Call{Entry: EntryServer, Server: "sh", Tool: "exec", Params: params("exec", args), Approver: k})
	}
	t.Run("a session's client decides through elicitation", func(t *testing.T) {
		k := &asker{canDecide: true, decide: func(a *mcpgatewayv1.Approval) { _, _ = f.gate.Decide(t.Context(), a.GetId(), true, "") }}
		if _, err := call(k, `{}`); err != nil || len(k.asked) != 1 || len(k.held) != 0 || k.asked[0].GetApprovalBy() != serverconfig.ApprovalByClient {
			t.Fatalf("%v, asked %v, held %v", err, k.asked, k.held)
		}
	})
	t.Run("a client without elicitation is refused, nothing opened", func(t *testing.T) {
		before := len(f.up.dispatched())
		_, err := call(&asker{}, `{}`)
		var refused *ApprovalError
		if !errors.As(err, &refused) || refused.State != ApprovalNoClient || len(f.up.dispatched()) != before {
			t.Fatalf("%v", err)
		}
		if p, _ := f.gate.Pending(t.Context()); len(p) != 0 {
			t.Fatalf("pending %v", p)
		}
	})
	t.Run("a chat waits for an administrator", func(t *testing.T) {
		k := &asker{canDecide: true, onHeldDecide: func(a *mcpgatewayv1.Approval) { _, _ = f.gate.Decide(t.Context(), a.GetId(), true, "") }}
		chat := &chatLike{k}
		_, err := f.p.Invoke(t.Context(), &Call{Entry: EntryChat, Server: "sh", Tool: "exec", Params: params("exec", `{}`), Approver: chat})
		if err != nil || len(k.held) != 1 || len(k.asked) != 0 {
			t.Fatalf("%v, held %v, asked %v", err, k.held, k.asked)
		}
	})
}

// chatLike is an approver that is no ClientAsker (a chat's).
type chatLike struct{ k *asker }

func (c *chatLike) Held(ctx context.Context, a *mcpgatewayv1.Approval) { c.k.Held(ctx, a) }

// TestAnApprovalCoversItsCallOnly: a modern client's first request ends with the
// input_required answer and an approval for its arguments; the retry that answers it runs
// the same call (its arguments in any order), and a retry with other arguments, another
// tool's, or one answering an approval an administrator decides, is refused and never runs.
// The client's decision is in the audit trail.
func TestAnApprovalCoversItsCallOnly(t *testing.T) {
	f := newFixture(t, server("sh", func(c *mcpgatewayv1.ServerConfig) {
		c.Approval, c.ApprovalBy = proto.String(serverconfig.ApprovalRequired), proto.String(serverconfig.ApprovalByClient)
	}), server("adm", func(c *mcpgatewayv1.ServerConfig) { c.Approval = proto.String(serverconfig.ApprovalRequired) }))
	trail := audit.New(f.reg, audit.Config{})
	f.p.audit = trail
	accept := json.RawMessage(`{"action":"accept"}`)
	first := func(args string) string {
		k := &asker{canDecide: true, modern: true}
		res, err := f.p.Invoke(t.Context(), &Call{Entry: EntryServer, Server: "sh", Tool: "exec", Params: params("exec", args), Approver: k})
		if err != nil || !strings.Contains(string(res), "input_required") || len(k.asked) != 1 {
			t.Fatalf("first request: %s %v", res, err)
		}
		return k.asked[0].GetId()
	}
	retry := func(server, tool, args, approval string) error {
		_, err := f.p.Invoke(t.Context(), &Call{Entry: EntryServer, Server: server, Tool: tool, Params: params(tool, args),
			Approver: &asker{canDecide: true, modern: true}, Retry: &Retry{Approval: approval, Answer: accept}})
		return err
	}
	id := first(`{"cmd":"echo harmless","n":1}`)
	before := len(f.up.dispatched())
	for name, err := range map[string]error{
		"other arguments": retry("sh", "exec", `{"cmd":"rm -rf /","n":1}`, id),
		"fewer arguments": retry("sh", "exec", `{"cmd":"echo harmless"}`, id),
	} {
		var refused *ApprovalError
		if !errors.As(err, &refused) || refused.State != ApprovalMismatch {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := f.up.dispatched(); len(got) != before {
		t.Fatalf("a retry for another call ran: %v", got[before:])
	}
	if err := retry("sh", "exec", `{"n":1, "cmd":"echo harmless"}`, id); err != nil {
		t.Fatalf("the approved call: %v", err)
	}
	if got := f.up.dispatched(); len(got) != before+1 || !strings.Contains(got[before], "echo harmless") {
		t.Fatalf("dispatched %v", got[before:])
	}
	if err := trail.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var actions []string
	_ = f.reg.ListAudit(t.Context(), registry.AuditQuery{}, func(e *mcpgatewayv1.AuditEntry) bool {
		actions = append(actions, e.GetKind()+" "+e.GetAction()+" "+e.GetTarget()+" "+e.GetServerId())
		return true
	})
	if want := "admin client_approve_tool_call " + id + " sh"; len(actions) != 1 || actions[0] != want {
		t.Fatalf("audit %q, want %q", actions, want)
	}
	if err := retry("sh", "exec", `{"n":1, "cmd":"echo harmless"}`, id); err == nil {
		t.Fatal("an approval was spent twice")
	}
	// An approval an administrator decides cannot be answered by a client's retry.
	held, done := make(chan string, 1), make(chan error, 1)
	go func() {
		k := &asker{canDecide: true, onHeldDecide: func(a *mcpgatewayv1.Approval) { held <- a.GetId() }}
		_, err := f.p.Invoke(t.Context(), &Call{Entry: EntryServer, Server: "adm", Tool: "exec", Params: params("exec", `{}`), Approver: k})
		done <- err
	}()
	var adminID string
	select {
	case adminID = <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not held")
	}
	var refused *ApprovalError
	if err := retry("adm", "exec", `{}`, adminID); !errors.As(err, &refused) || refused.State != ApprovalNotAsked {
		t.Fatalf("a client answered an administrator's approval: %v", err)
	}
	if a, err := f.gate.Get(t.Context(), adminID); err != nil || a.GetState() != registry.ApprovalPending {
		t.Fatalf("the administrator's approval: %v %v", a, err)
	}
	if _, err := f.gate.Decide(as(t.Context(), "admin-key"), adminID, false, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.As(err, &refused) || refused.State != registry.ApprovalDenied {
		t.Fatalf("the held call: %v", err)
	}
}
