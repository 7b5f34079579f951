package zestctl

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Health of mcpgateway, inference and the tool host, with the models and engine replicas",
		Long: `status asks each service for its gRPC health, and the inference service for its models
(loaded and available) and engine replicas. It exits 5 when a service is not serving.`,
		Args: args(0, "none"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			type svc struct {
				Name   string `json:"name"`
				Addr   string `json:"addr"`
				Status string `json:"status"`
				Error  string `json:"error,omitempty"`
			}
			var svcs []svc
			down := 0
			checks := []struct{ name, addr string }{{"mcpgateway", a.mcpgwAddr}, {"inference", a.infAddr}}
			// Every tool host: those listed, or those the dns:/// name resolves to now.
			hosts, dnsName, _ := toolhostAddrs(a.hostAddr)
			var resolveErr error
			if dnsName != "" {
				hosts, resolveErr = resolveToolhosts(ctx, a.hostAddr)
			}
			for _, h := range hosts {
				checks = append(checks, struct{ name, addr string }{"toolhost", h})
			}
			for _, s := range checks {
				one := svc{Name: s.name, Addr: s.addr}
				cc, err := a.conn(s.addr)
				if err == nil {
					var r *healthpb.HealthCheckResponse
					r, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
					if err == nil {
						one.Status = r.GetStatus().String()
					}
				}
				if err != nil {
					one.Status, one.Error = "UNREACHABLE", status.Convert(err).Message()
				}
				if one.Status != "SERVING" {
					down++
				}
				svcs = append(svcs, one)
			}
			if resolveErr != nil {
				svcs = append(svcs, svc{Name: "toolhost", Addr: a.hostAddr, Status: "UNREACHABLE", Error: resolveErr.Error()})
				down++
			}
			out := map[string]any{"services": svcs}
			var models *inferencev1.ListModelsResponse
			var replicas *inferencev1.ListReplicasResponse
			var modelsErr error
			if cc, err := a.conn(a.infAddr); err == nil && svcs[1].Status == "SERVING" {
				inf := inferencev1.NewInferenceServiceClient(cc)
				models, modelsErr = inf.ListModels(ctx, &inferencev1.ListModelsRequest{IncludeAvailable: true})
				if modelsErr == nil {
					replicas, modelsErr = inf.ListReplicas(ctx, &inferencev1.ListReplicasRequest{})
				}
			}
			if models != nil {
				out["models"] = plainList(models.GetModels())
			}
			if replicas != nil {
				out["replicas"] = plainList(replicas.GetReplicas())
			}
			if modelsErr != nil {
				out["models_error"] = describe(modelsErr)
			}
			err := a.emit(out, func(w io.Writer) {
				fmt.Fprintln(w, "SERVICE\tADDRESS\tSTATUS\tERROR")
				for _, s := range svcs {
					row(w, s.Name, s.Addr, s.Status, s.Error)
				}
				if models != nil {
					fmt.Fprintln(w, "\nMODEL\tTYPE\tSTATE\tENGINE")
					for _, m := range models.GetModels() {
						row(w, m.GetId(), enumWord(m.GetType().String(), "MODEL_TYPE_"), enumWord(m.GetState().String(), "MODEL_STATE_"), m.GetEngine())
					}
				}
				if len(replicas.GetReplicas()) > 0 {
					fmt.Fprintln(w, "\nREPLICA MODEL\tBASE URL\tHEALTHY\tIN FLIGHT\tLAST ERROR")
					for _, r := range replicas.GetReplicas() {
						row(w, r.GetModel(), r.GetBaseUrl(), r.GetHealthy(), r.GetInFlight(), r.GetLastError())
					}
				}
				if modelsErr != nil {
					fmt.Fprintf(w, "\nmodels: %s\n", describe(modelsErr))
				}
			})
			if err != nil {
				return err
			}
			if down > 0 {
				return exitError{code: ExitUnavailable, msg: fmt.Sprintf("%d of 3 services not serving", down)}
			}
			if modelsErr != nil {
				// The services serve but the key does not reach the models: say so in the code.
				if c := status.Code(modelsErr); c == codes.Unauthenticated || c == codes.PermissionDenied {
					return modelsErr
				}
			}
			return nil
		},
	}
}

// enumWord shows an enum value as a short word: MODEL_STATE_LOADED → loaded.
func enumWord(v, prefix string) string { return strings.ToLower(strings.TrimPrefix(v, prefix)) }
