package compact

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/ctxguard/ctxguard/internal/baseurl"
)

// SummarizerConfig says who writes compaction summaries (YAML key
// `compact.summarizer`). Package summarize implements it.
type SummarizerConfig struct {
	// Mode is "session" (the default: the session's own upstream and
	// protocol, a small model of its family, the credentials of the
	// session's own request, held in memory for the call only),
	// "endpoint" (Endpoint, Protocol, Model and the key in the
	// environment variable APIKeyEnv), or "none" (no model: the
	// extractive summary).
	Mode string `yaml:"mode"`
	// Model overrides the small model (session mode); required with an
	// endpoint.
	Model string `yaml:"model"`
	// Endpoint is the base URL of the API to call (endpoint mode), as for
	// upstreams: https://api.anthropic.com.
	Endpoint string `yaml:"endpoint"`
	// Protocol is the endpoint's API: anthropic, responses or chat.
	Protocol string `yaml:"protocol"`
	// APIKeyEnv names the environment variable holding the endpoint's
	// key; the key never appears in the configuration.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds one attempt. Default 2m.
	Timeout time.Duration `yaml:"timeout"`
	// Retries is how many times a failed attempt (a network error, 429,
	// 5xx) is repeated. Default 2.
	Retries int `yaml:"retries"`
	// Concurrency caps the summaries written at once, over all sessions.
	// Default 2.
	Concurrency int `yaml:"concurrency"`
}

// DefaultSummarizer returns the summarizer ctxguard ships with.
func DefaultSummarizer() SummarizerConfig {
	return SummarizerConfig{Mode: "session", Timeout: 2 * time.Minute, Retries: 2, Concurrency: 2}
}

// Validate reports every problem in c, joined, or nil.
func (c SummarizerConfig) Validate() error {
	var errs []error
	switch c.Mode {
	case "session", "none":
	case "endpoint":
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("summarizer.endpoint: %q is not an http(s) URL", c.Endpoint))
		} else if err := baseurl.Check("summarizer.endpoint", c.Endpoint); err != nil {
			errs = append(errs, err)
		}
		switch c.Protocol {
		case "anthropic", "responses", "chat":
		default:
			errs = append(errs, fmt.Errorf("summarizer.protocol: %q must be anthropic, responses or chat", c.Protocol))
		}
		if c.Model == "" {
			errs = append(errs, errors.New("summarizer.model: an endpoint needs a model"))
		}
		if c.APIKeyEnv == "" {
			errs = append(errs, errors.New("summarizer.api_key_env: an endpoint needs the name of the variable holding its key"))
		}
	default:
		errs = append(errs, fmt.Errorf("summarizer.mode: %q must be session, endpoint or none", c.Mode))
	}
	if c.Timeout <= 0 || c.Retries < 0 || c.Retries > 10 || c.Concurrency <= 0 {
		errs = append(errs, fmt.Errorf("summarizer: timeout (%v) and concurrency (%d) must be positive, retries (%d) in [0, 10]", c.Timeout, c.Concurrency, c.Retries))
	}
	return errors.Join(errs...)
}
