package model

// The embedded registry. Figures were read on 2026-11-22 from the sources
// named in the comments; a source that is not the vendor's own page is
// marked as such. Window is the context window the model gets by default;
// LongWindow is the window a request can ask for on models that offer a
// larger one behind a beta header (Anthropic's context-1m-2025-08-07) or
// the "[1m]" model suffix Claude Code understands.
//
// Binding is true for the models whose thinking blocks are bound to the
// exact prefix that produced them ("preserved thinking"): the API's prefix
// check runs on them, and a request that edits history before a returned
// thinking block either fails with "The block is bound to a different
// conversation" or needs thinking.block_binding.prefix_mismatch_behavior
// "drop_block" (beta thinking-binding-controls-2026-08-01). Source:
// https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks
// (supportedModels: claude-fable-5-2, claude-mythos-5-2, claude-fable-5-1,
// claude-mythos-5-1, claude-opus-5-5, claude-sonnet-5-5, claude-haiku-5-5),
// and https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2
// (Fable 5.2 and Mythos 5.2 check on every account, Mythos 5.1 already
// returns the error, Fable 5.1 on accounts created from 2026-08-31).

const (
	k200 = 200_000
	m1   = 1_000_000
)

var builtin = []Info{
	// Anthropic. Current lineup: https://platform.claude.com/docs/en/models/overview
	// and the per-model pages https://platform.claude.com/docs/en/models/<id>/overview
	// ("Context window: 1M tokens · Max output: 128K tokens").
	{ID: "claude-fable-5-2", Provider: Anthropic, Window: m1, MaxOutput: 128_000, Binding: true},
	{ID: "claude-mythos-5-2", Provider: Anthropic, Window: m1, MaxOutput: 128_000, Binding: true},
	{ID: "claude-fable-5-1", Provider: Anthropic, Window: m1, MaxOutput: 128_000, Binding: true},
	{ID: "claude-mythos-5-1", Provider: Anthropic, Window: m1, MaxOutput: 128_000, Binding: true},
	// https://platform.claude.com/docs/en/models/fable-5/introducing-claude-fable-5-and-claude-mythos-5
	{ID: "claude-fable-5", Provider: Anthropic, Window: m1, MaxOutput: 128_000},
	{ID: "claude-mythos-5", Provider: Anthropic, Window: m1, MaxOutput: 128_000},
	// https://platform.claude.com/docs/en/models/opus-5-5/overview (via the
	// comparison tables of the sonnet-5-5 and haiku-5-5 pages)
	{ID: "claude-opus-5-5", Provider: Anthropic, Window: m1, MaxOutput: 128_000, Binding: true},
	// https://platform.claude.com/docs/en/models/sonnet-5-5/overview
	{ID: "claude-sonnet-5-5", Provider: Anthropic, Window: m1, MaxOutput: 128_000, Binding: true},
	// https://platform.claude.com/docs/en/models/haiku-5-5/overview (released 2026-10-07)
	{ID: "claude-haiku-5-5", Provider: Anthropic, Window: m1, MaxOutput: 128_000, Binding: true},
	// https://platform.claude.com/docs/en/models/opus-5/overview (legacy)
	{ID: "claude-opus-5", Provider: Anthropic, Window: m1, MaxOutput: 128_000},
	// https://platform.claude.com/docs/en/models/sonnet-5/overview (legacy)
	{ID: "claude-sonnet-5", Provider: Anthropic, Window: m1, MaxOutput: 128_000},
	// https://platform.claude.com/docs/en/models/opus-4-8/overview (legacy)
	{ID: "claude-opus-4-8", Provider: Anthropic, Window: m1, MaxOutput: 128_000},
	// Opus 4.7: 1M / 128K per the models page as quoted on 2026-05-09
	// (tygartmedia.com, "numbers pulled directly from Anthropic's official
	// models page"; third party).
	{ID: "claude-opus-4-7", Provider: Anthropic, Window: m1, MaxOutput: 128_000},
	// Opus 4.6: first Opus with a 1M window (vercel.com/ai-gateway model
	// page; third party), 128K output (toolsdock.com; third party).
	{ID: "claude-opus-4-6", Provider: Anthropic, Window: m1, MaxOutput: 128_000},
	// Sonnet 4.6: 1M / 64K (same tygartmedia.com table).
	{ID: "claude-sonnet-4-6", Provider: Anthropic, Window: m1, MaxOutput: 64_000},
	// Opus 4.5: 200K / 64K (aspire.dev Foundry model catalogue; third party).
	{ID: "claude-opus-4-5", Provider: Anthropic, Window: k200, MaxOutput: 64_000},
	// Sonnet 4.5 and Sonnet 4: 200K, 1M with the context-1m-2025-08-07 beta
	// (platform.claude.com/docs/en/build-with-claude/context-windows), 64K output.
	{ID: "claude-sonnet-4-5", Provider: Anthropic, Window: k200, LongWindow: m1, MaxOutput: 64_000},
	{ID: "claude-sonnet-4", Provider: Anthropic, Window: k200, LongWindow: m1, MaxOutput: 64_000},
	// Haiku 4.5: 200K / 64K (models overview comparison table).
	{ID: "claude-haiku-4-5", Provider: Anthropic, Window: k200, MaxOutput: 64_000},
	// Opus 4.1 and 4: 200K / 32K; Sonnet 3.7: 200K / 64K; Haiku 3.5: 200K / 8192
	// (legacy; as listed in the platform docs' legacy model table).
	{ID: "claude-opus-4-1", Provider: Anthropic, Window: k200, MaxOutput: 32_000},
	{ID: "claude-opus-4", Provider: Anthropic, Window: k200, MaxOutput: 32_000},
	{ID: "claude-3-7-sonnet", Provider: Anthropic, Window: k200, MaxOutput: 64_000},
	{ID: "claude-3-5-haiku", Provider: Anthropic, Window: k200, MaxOutput: 8_192},

	// OpenAI. GPT-5.6 (released 2026-07-09): 1,050,000 / 128,000
	// (https://developers.openai.com/api/docs/models/gpt-5.6-sol, as listed
	// on vercel.com/ai-gateway/models/gpt-5.6-sol-fast and -terra, -luna).
	{ID: "gpt-5.6-sol", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000},
	{ID: "gpt-5.6-terra", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000},
	{ID: "gpt-5.6-luna", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000},
	// GPT-5.5 and 5.4: 1,050,000 / 128,000 (docs.oxen.ai gpt-5-5-2026-04-23;
	// third party, "carries forward the 1,050,000-token context window").
	{ID: "gpt-5.5", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000},
	{ID: "gpt-5.5-pro", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000},
	{ID: "gpt-5.4", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000},
	// GPT-5 through 5.2 (and their mini/nano/codex variants, by prefix):
	// 400,000 / 128,000 (https://platform.openai.com/docs/models/gpt-5.2 as
	// listed on vercel.com/ai-gateway/models/openai/gpt-5.2-fast).
	{ID: "gpt-5.2", Provider: OpenAI, Window: 400_000, MaxOutput: 128_000},
	{ID: "gpt-5.1", Provider: OpenAI, Window: 400_000, MaxOutput: 128_000},
	{ID: "gpt-5", Provider: OpenAI, Window: 400_000, MaxOutput: 128_000},
	// The chat-tuned snapshots are smaller: 128,000 / 16,384.
	{ID: "gpt-5-chat-latest", Provider: OpenAI, Window: 128_000, MaxOutput: 16_384},
	{ID: "gpt-5.1-chat-latest", Provider: OpenAI, Window: 128_000, MaxOutput: 16_384},
	// Earlier models still in use by agents.
	{ID: "gpt-4.1", Provider: OpenAI, Window: 1_047_576, MaxOutput: 32_768},
	{ID: "gpt-4o", Provider: OpenAI, Window: 128_000, MaxOutput: 16_384},
	{ID: "o3", Provider: OpenAI, Window: 200_000, MaxOutput: 100_000},
	{ID: "o4-mini", Provider: OpenAI, Window: 200_000, MaxOutput: 100_000},

	// Google. https://ai.google.dev/gemini-api/docs/models/<id>
	// ("Input token limit 1,048,576 / Output token limit 65,536").
	{ID: "gemini-3.8-flash", Provider: Google, Window: 1_000_000, MaxOutput: 65_536}, // vercel.com/ai-gateway/models/gemini-3.8-flash (third party)
	{ID: "gemini-3.5-flash", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
	{ID: "gemini-3.1-pro", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
	{ID: "gemini-3-pro", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
	{ID: "gemini-3-flash", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
	{ID: "gemini-2.5-pro", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
	{ID: "gemini-2.5-flash", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
	{ID: "gemini-2.5-flash-lite", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
	// Any other Gemini: the common 1M / 64K limits.
	{ID: "gemini", Provider: Google, Window: 1_048_576, MaxOutput: 65_536},
}
