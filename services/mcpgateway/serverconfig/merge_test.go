package serverconfig

import (
	"testing"
)

// TestLemonadeFieldsExist: every name of lemonadeFields and stdioZestFields is a field of a
// server config (a renamed field would silently become a Zest one, kept by upserts).
func TestLemonadeFieldsExist(t *testing.T) {
	for _, name := range append(lemonadeFields[:len(lemonadeFields):len(lemonadeFields)], stdioZestFields...) {
		if configFields.ByName(name) == nil {
			t.Errorf("%s names no field of ServerConfig", name)
		}
	}
	for _, name := range stdioZestFields {
		if LemonadeField(configFields.ByName(name)) {
			t.Errorf("%s is Lemonade's: an upsert replaces it anyway", name)
		}
	}
}
