package redistest

import "testing"

// TestStart: the server answers, keeps what it is told, and asks for the
// password when it has one.
func TestStart(t *testing.T) {
	s := Start(t, Options{})
	if got, err := s.Do("", "SET", "k", "v w"); err != nil || got != "OK" {
		t.Fatalf("SET: %q, %v", got, err)
	}
	if got, err := s.Do("", "GET", "k"); err != nil || got != "v w" {
		t.Fatalf("GET: %q, %v", got, err)
	}
	p := Start(t, Options{Password: "s3cret"})
	if _, err := p.Do("", "GET", "k"); err == nil {
		t.Error("a server with a password answered without it")
	}
	if got, err := p.Do("s3cret", "PING"); err != nil || got != "PONG" {
		t.Errorf("PING with the password: %q, %v", got, err)
	}
}
