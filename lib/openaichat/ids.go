package openaichat

import (
	"crypto/rand"
	"encoding/hex"
)

// NewCompletionID returns a fresh completion id: "chatcmpl-" and 24 random hex digits (96
// bits), so that no two responses share one, whatever their time or content.
func NewCompletionID() string { return "chatcmpl-" + randomHex() }

// NewToolCallID returns a fresh tool call id: "call_" and 24 random hex digits.
func NewToolCallID() string { return "call_" + randomHex() }

func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b[:])
}
