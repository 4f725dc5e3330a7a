package serve

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/proxy"
)

// TestProxyTimeouts: every proxy timeout comes from the configuration,
// whose defaults are the proxy's, and a configuration's 0 disables it.
func TestProxyTimeouts(t *testing.T) {
	if diff := cmp.Diff(proxy.DefaultTimeouts(), proxyTimeouts(config.DefaultTimeouts())); diff != "" {
		t.Errorf("default timeouts differ (-proxy +config)\n%s", diff)
	}
	off := reflect.ValueOf(proxyTimeouts(config.Timeouts{}))
	for i := range off.NumField() {
		if v := off.Field(i).Int(); v != -1 {
			t.Errorf("timeouts.%s: a disabled config value maps to %d, want -1", off.Type().Field(i).Name, v)
		}
	}
}
