package stdio

import (
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// The child's messages are read in one pass: decodeMessage walks a line once, checking that it
// is JSON as encoding/json does, and keeps each member it needs as a slice of the line. It
// replaced json.Unmarshal into inMsg, which went over the line twice (checking it whole, then
// decoding) and copied every member it kept (~5 % of the tool host's CPU on a federated call);
// FuzzClassify holds the two to the same answers.

// maxNestingDepth is encoding/json's: a message nested deeper is not JSON to it, nor to us.
const maxNestingDepth = 10000

// msgScanner reads one JSON text from b, from i.
type msgScanner struct {
	b []byte
	i int
}

func (s *msgScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next is the byte at i, or 0 at the end.
func (s *msgScanner) next() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str skips a string starting at i (a '"'); escaped says whether it holds a backslash.
func (s *msgScanner) str() (escaped, ok bool) {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return escaped, true
		case c < 0x20:
			return false, false
		case c == '\\':
			escaped = true
			s.i++
			switch s.next() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for range 4 {
					if !isHex(s.next()) {
						return false, false
					}
					s.i++
				}
			default:
				return false, false
			}
		default:
			s.i++
		}
	}
	return false, false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number skips a number starting at i.
func (s *msgScanner) number() bool {
	if s.next() == '-' {
		s.i++
	}
	switch c := s.next(); {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		for isDigit(s.next()) {
			s.i++
		}
	default:
		return false
	}
	if s.next() == '.' {
		s.i++
		if !isDigit(s.next()) {
			return false
		}
		for isDigit(s.next()) {
			s.i++
		}
	}
	if c := s.next(); c == 'e' || c == 'E' {
		s.i++
		if c := s.next(); c == '+' || c == '-' {
			s.i++
		}
		if !isDigit(s.next()) {
			return false
		}
		for isDigit(s.next()) {
			s.i++
		}
	}
	return true
}

// literal skips word (true, false or null) at i.
func (s *msgScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// scalar skips a string, number or literal at i.
func (s *msgScanner) scalar() bool {
	switch c := s.next(); c {
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || isDigit(c) {
			return s.number()
		}
		return false
	}
}

// memberName skips an object's member name and its colon, from i (after whitespace), to the
// whitespace before the value.
func (s *msgScanner) memberName() bool {
	if s.next() != '"' {
		return false
	}
	if _, ok := s.str(); !ok {
		return false
	}
	s.ws()
	if s.next() != ':' {
		return false
	}
	s.i++
	s.ws()
	return true
}

// value skips one value at i (after whitespace) nested depth deep, without recursion: open
// holds the containers it is in.
func (s *msgScanner) value(depth int) bool {
	var stack [32]byte
	open := stack[:0]
	for {
		switch c := s.next(); c {
		case '{', '[':
			if depth+len(open)+1 > maxNestingDepth {
				return false
			}
			open = append(open, c)
			s.i++
			s.ws()
			if c == '{' && s.next() == '}' || c == '[' && s.next() == ']' {
				s.i++
				open = open[:len(open)-1]
				break
			}
			if c == '{' && !s.memberName() {
				return false
			}
			continue
		default:
			if !s.scalar() {
				return false
			}
		}
		// After a value: the next one in its container, or the container's end.
		for {
			if len(open) == 0 {
				return true
			}
			s.ws()
			top := open[len(open)-1]
			c := s.next()
			if c == ',' {
				s.i++
				s.ws()
				if top == '{' && !s.memberName() {
					return false
				}
				break
			}
			if top == '{' && c == '}' || top == '[' && c == ']' {
				s.i++
				open = open[:len(open)-1]
				continue
			}
			return false
		}
	}
}

// decodeMessage reads raw as encoding/json would into inMsg: ok is false when raw is not
// JSON or is JSON but neither an object nor null (null leaves m empty). The members are
// slices of raw.
func decodeMessage(raw []byte) (m inMsg, ok bool) {
	s := msgScanner{b: raw}
	s.ws()
	if s.next() == 'n' {
		if !s.literal("null") {
			return m, false
		}
		s.ws()
		return m, s.i == len(raw)
	}
	if s.next() != '{' {
		return m, false
	}
	s.i++
	s.ws()
	if s.next() == '}' {
		s.i++
	} else {
		for {
			if s.next() != '"' {
				return m, false
			}
			start := s.i
			escaped, ok := s.str()
			if !ok {
				return m, false
			}
			name := raw[start+1 : s.i-1]
			s.ws()
			if s.next() != ':' {
				return m, false
			}
			s.i++
			s.ws()
			vstart := s.i
			if !s.value(1) {
				return m, false
			}
			if field := m.field(name, escaped); field != nil {
				*field = raw[vstart:s.i]
			}
			s.ws()
			if s.next() == ',' {
				s.i++
				s.ws()
				continue
			}
			if s.next() != '}' {
				return m, false
			}
			s.i++
			break
		}
	}
	s.ws()
	return m, s.i == len(raw)
}

// field is the member of m that name (unquoted when escaped) sets, as encoding/json matches
// names: exactly, or else case-insensitively (its folding: "ID", "paramſ" and "reſult" match).
func (m *inMsg) field(name []byte, escaped bool) *json.RawMessage {
	if escaped || !isASCII(name) {
		var n string
		if json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &n) != nil {
			return nil
		}
		name = []byte(n)
	}
	var buf [24]byte
	if len(name) > len(buf) { // no name that folds to one of inMsg's is this long
		return nil
	}
	switch string(appendFoldedName(buf[:0], name)) {
	case "ID":
		return &m.ID
	case "METHOD":
		return &m.Method
	case "PARAMS":
		return &m.Params
	case "RESULT":
		return &m.Result
	case "ERROR":
		return &m.Error
	}
	return nil
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// appendFoldedName is encoding/json's folding of a member name: ASCII letters upper-cased,
// any other rune the smallest of its simple case folds.
func appendFoldedName(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
