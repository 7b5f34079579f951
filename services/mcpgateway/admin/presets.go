package admin

import (
	"context"
	"errors"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/audit"
	"github.com/zestmcp/zest/services/mcpgateway/registry"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ListPresets lists every chat preset.
func (s *Service) ListPresets(ctx context.Context, _ *mcpgatewayv1.ListPresetsRequest) (*mcpgatewayv1.ListPresetsResponse, error) {
	ps, err := s.reg.ListPresets(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if ps == nil {
		ps = []*mcpgatewayv1.Preset{}
	}
	return &mcpgatewayv1.ListPresetsResponse{Presets: ps}, nil
}

// GetPreset shows one preset.
func (s *Service) GetPreset(ctx context.Context, req *mcpgatewayv1.GetPresetRequest) (*mcpgatewayv1.GetPresetResponse, error) {
	p, err := s.reg.GetPreset(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpgatewayv1.GetPresetResponse{Preset: p}, nil
}

// UpsertPreset validates and stores a preset (both the provider list and the legacy flag).
func (s *Service) UpsertPreset(ctx context.Context, req *mcpgatewayv1.UpsertPresetRequest) (*mcpgatewayv1.UpsertPresetResponse, error) {
	s.upsertMu.Lock()
	defer s.upsertMu.Unlock()
	p, err := serverconfig.ParsePreset(req.GetPreset(), func(id string) bool {
		_, err := s.reg.GetPreset(ctx, id)
		return err == nil
	}, func(id string) bool {
		_, err := s.reg.GetServer(ctx, id)
		return err == nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.checkModel(ctx, p.GetModel()); err != nil {
		return nil, toStatus(err)
	}
	old, err := s.reg.GetPreset(ctx, p.GetId())
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return nil, toStatus(err)
	}
	if err := serverconfig.KeepPresetTools(p, old, req.GetPreset(), req.GetUpdateMask().GetPaths()); err != nil {
		return nil, toStatus(err)
	}
	if err := s.reg.PutPreset(ctx, p); err != nil {
		return nil, toStatus(err)
	}
	audit.NoteChanged(ctx, audit.Changed(old, p))
	s.changes.Changed(ctx, registry.Change{Kind: registry.PresetPut, ID: p.GetId(), Preset: p}, nil)
	return &mcpgatewayv1.UpsertPresetResponse{Preset: p}, nil
}

// checkModel refuses a preset model the inference service does not know (every chat of the
// preset would fail on it). An inference service that cannot answer does not stop the save:
// the model is checked again by each chat.
func (s *Service) checkModel(ctx context.Context, model string) error {
	if model == "" || s.models == nil {
		return nil
	}
	_, err := s.models.GetModel(ctx, &inferencev1.GetModelRequest{Id: model})
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.NotFound:
		return serverconfig.UnknownModel(model)
	}
	s.log.Warn("preset model not checked: the inference service did not answer", "model", model, "err", err)
	return nil
}

// DeletePreset forgets a preset.
func (s *Service) DeletePreset(ctx context.Context, req *mcpgatewayv1.DeletePresetRequest) (*mcpgatewayv1.DeletePresetResponse, error) {
	if err := s.reg.DeletePreset(ctx, req.GetId()); err != nil {
		return nil, toStatus(err)
	}
	s.changes.Changed(ctx, registry.Change{Kind: registry.PresetDeleted, ID: req.GetId()}, nil)
	return &mcpgatewayv1.DeletePresetResponse{Removed: req.GetId()}, nil
}
