package price

// Time-aware cost. A provider keeps a cached prompt prefix for a while
// after its last use (model.Info.CacheTTL): a request that comes later
// finds it gone and writes its whole prompt again. A request may ask for
// the provider's extended lifetime (cachelife.Extended); at Anthropic the
// writes of such a request cost more (Price.Extended).

// Extended returns the prices of a request that asked for the extended
// cache lifetime: at a provider with a cache-write premium (CacheWrite
// above Input: Anthropic) a write then costs twice the input price
// (platform.claude.com/docs/en/build-with-claude/prompt-caching, "1h
// cache write tokens are 2 times the base input tokens price"), in the
// long-prompt rates too; without a premium (OpenAI's extended retention)
// nothing changes.
func (p Price) Extended() Price {
	if p.CacheWrite > p.Input {
		p.CacheWrite = 2 * p.Input
	}
	if l := p.Long; l != nil && l.CacheWrite > l.Input {
		c := *l
		c.CacheWrite = 2 * c.Input
		p.Long = &c
	}
	return p
}
