package mcp

import (
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP session over HTTP that stays idle past SessionIdle is forgotten,
// so clients that vanish without ending theirs do not pile up.
func TestSessionIdle(t *testing.T) {
	for _, tt := range []struct {
		idle    time.Duration
		forgets bool
	}{
		{200 * time.Millisecond, true},
		{0, false}, // DefaultSessionIdle
	} {
		srv := httptest.NewServer(Handler(Config{SessionIdle: tt.idle, Logger: slog.New(slog.DiscardHandler)}))
		client := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := client.Connect(t.Context(), &gomcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		_, err = cs.ListTools(t.Context(), nil)
		if forgot := err != nil; forgot != tt.forgets {
			t.Errorf("idle %v: after a second idle, ListTools = %v; want the session forgotten: %v", tt.idle, err, tt.forgets)
		}
		cs.Close()
		srv.Close()
	}
}
