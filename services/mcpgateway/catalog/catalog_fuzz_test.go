package catalog

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var chatNameShape = regexp.MustCompile(`^mcp_[A-Za-z0-9_-]+$`)

// FuzzChatName checks ChatName against docs/dev/contracts.md's chat_name rule for any server id and
// tool name, and that a second pair whose parts clean to the same text gets another name.
// The second pair is made from the first: each character the cleaning replaces is swapped
// for one of other's characters, and pad puts '_' around the parts.
//
//	go test -run '^$' -fuzz '^FuzzChatName$' -fuzztime 60s ./catalog/
func FuzzChatName(f *testing.F) {
	f.Add("echo", "echo", "!", uint8(0))
	f.Add("files.v2", "read", "_", uint8(0))
	f.Add("s", "a__b", ".", uint8(1))
	f.Add("s", "read file", "?", uint8(2))
	f.Add("s", "café", "é", uint8(0))
	f.Add("", "", "", uint8(3))
	f.Add(strings.Repeat("a", 40), strings.Repeat("b", 40), "-", uint8(0))
	f.Add(strings.Repeat("b", 38)+"-"+strings.Repeat("c", 30), "t", ".", uint8(1))
	f.Add("\xff\xfe", "日本語", "\x00", uint8(2))
	f.Fuzz(func(t *testing.T, server, tool, other string, pad uint8) {
		name := ChatName(server, tool)
		if len(name) > MaxChatName || !chatNameShape.MatchString(name) {
			t.Fatalf("ChatName(%q, %q) = %q (%d characters): want ^mcp_[A-Za-z0-9_-]+$, at most 64", server, tool, name, len(name))
		}
		if want := designChatName(server, tool); name != want {
			t.Fatalf("ChatName(%q, %q) = %q, docs/dev/contracts.md's rule gives %q", server, tool, name, want)
		}
		if again := ChatName(server, tool); again != name {
			t.Fatalf("ChatName(%q, %q) gave %q, then %q", server, tool, name, again)
		}

		server2, tool2 := swapCleaned(server, other), swapCleaned(tool, other)
		if pad&1 != 0 {
			server2 = "_" + server2
		}
		if pad&2 != 0 {
			tool2 += "_"
		}
		if server2 == server && tool2 == tool || clean(server2) != clean(server) || clean(tool2) != clean(tool) {
			return
		}
		// Two pairs whose parts clean alike: at least one was changed by cleaning, so it
		// carries the hash suffix, and docs/dev/contracts.md's hash input server_id + "\n" + tool tells
		// them apart unless the two inputs are the same text: ("a", "\nx") and ("a\n", "x")
		// get one name by the rule. Server ids never hold a newline (serverconfig.IDPattern).
		if name2 := ChatName(server2, tool2); name2 == name && server2+"\n"+tool2 != server+"\n"+tool {
			t.Fatalf("(%q, %q) and (%q, %q) share chat_name %q", server, tool, server2, tool2, name)
		}
	})
}

// designChatName is docs/dev/contracts.md's chat_name rule written out on its own, as the oracle:
// clean each part (characters outside [A-Za-z0-9_-] → '_', counted per Unicode character;
// trim '_'; empty → "tool"); name = "mcp_" + server + "__" + tool; when cleaning changed
// anything or a cleaned part holds "__", append '_' + 16 hex digits of FNV-1a-64 over
// server_id + "\n" + tool; over 64 characters → cut to 47, trim trailing '_'/'-', append the
// suffix.
func designChatName(server, tool string) string {
	part := func(p string) string {
		rs := []rune(p) // an invalid byte is one character (U+FFFD)
		for i, r := range rs {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", r) {
				rs[i] = '_'
			}
		}
		if c := strings.Trim(string(rs), "_"); c != "" {
			return c
		}
		return "tool"
	}
	s, t := part(server), part(tool)
	h := fnv.New64a()
	h.Write([]byte(server + "\n" + tool))
	suffix := fmt.Sprintf("_%016x", h.Sum64())
	name := "mcp_" + s + "__" + t
	if s != server || t != tool || strings.Contains(s, "__") || strings.Contains(t, "__") {
		name += suffix
	}
	if utf8.RuneCountInString(name) > 64 {
		name = strings.TrimRight(string([]rune(name)[:47]), "_-") + suffix
	}
	return name
}

// swapCleaned replaces each character of p that cleaning turns into '_' ('_' included)
// with the next such character of with, cycling; p is returned as it is when with has none.
func swapCleaned(p, with string) string {
	toUnderscore := func(r rune) bool { return clean("a"+string(r)+"a") == "a_a" }
	var subs []rune
	for _, r := range with {
		if toUnderscore(r) {
			subs = append(subs, r)
		}
	}
	if len(subs) == 0 {
		return p
	}
	var b strings.Builder
	i := 0
	for _, r := range p {
		if toUnderscore(r) {
			r = subs[i%len(subs)]
			i++
		}
		b.WriteRune(r)
	}
	return b.String()
}
