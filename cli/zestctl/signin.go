package zestctl

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// signInPoll is how often servers sign-in looks whether the sign-in finished.
const signInPoll = time.Second

// signInCmd is servers sign-in ID: Zest's sign-in to a server that signs in by OAuth
// (authorization code with PKCE). It prints the authorization server's URL to open in a
// browser, which comes back to Zest's callback (on the edge, ZEST_PUBLIC_URL), and waits,
// up to --timeout, until the server's state says it is signed in.
func (a *app) signInCmd() *cobra.Command {
	var redirect string
	c := &cobra.Command{
		Use: "sign-in ID", Short: "Sign Zest in to a server that requires OAuth: open the printed URL in a browser", Args: args(1, "ID"),
		ValidArgsFunction: a.completeIDs(a.serverIDs),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cc, err := a.conn(a.mcpgwAddr)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := mcpgatewayv1.NewUpstreamOAuthServiceClient(cc).StartSignIn(ctx, &mcpgatewayv1.StartSignInRequest{Id: argv[0], RedirectUri: redirect})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "Open this URL in a browser and sign in (waiting up to %v):\n", a.timeout)
			fmt.Fprintln(a.stdout, r.GetAuthorizationUrl())
			st, err := a.waitSignedIn(ctx, mcpgatewayv1.NewAdminServiceClient(cc), argv[0])
			if err != nil {
				return err
			}
			return a.emit(st, func(w io.Writer) {
				fmt.Fprintf(w, "signed in to %s as %s until %s\n", argv[0], st.GetSubject(), st.GetExpires())
			})
		},
	}
	c.Flags().StringVar(&redirect, "redirect-uri", "", "Zest's callback as the browser reaches it, https://HOST/internal/mcp/oauth/callback (default: mcpgateway's ZEST_PUBLIC_URL)")
	return c
}

// waitSignedIn polls the server's state until it is signed in with an expiry later than when
// the wait began (a new sign-in), or ctx ends.
func (a *app) waitSignedIn(ctx context.Context, adm mcpgatewayv1.AdminServiceClient, id string) (*mcpgatewayv1.UpstreamOAuthState, error) {
	before := ""
	if r, err := adm.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: id}); err == nil && r.GetServer().GetOauthState().GetStatus() == "signed_in" {
		before = r.GetServer().GetOauthState().GetExpires()
	}
	t := time.NewTicker(signInPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no sign-in to %s within %v: open the URL, or run the command again (--timeout)", id, a.timeout)
		case <-t.C:
		}
		r, err := adm.GetServer(ctx, &mcpgatewayv1.GetServerRequest{Id: id})
		if err != nil {
			return nil, err
		}
		if st := r.GetServer().GetOauthState(); st.GetStatus() == "signed_in" && st.GetExpires() != before {
			return st, nil
		}
	}
}
