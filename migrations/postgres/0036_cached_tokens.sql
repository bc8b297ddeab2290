-- The prompt tokens a provider reused from its cache (OpenAI's and vLLM's
-- `prompt_tokens_details.cached_tokens`, llama.cpp's `timings.cache_n`), beside the
-- prompt's total, per model call and per turn: `!usage` and the metrics show cached
-- against fresh, and `budget.cached_token_weight` prices them.
ALTER TABLE llm_usage ADD COLUMN prompt_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE llm_usage ADD COLUMN cached_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN cached_tokens BIGINT NOT NULL DEFAULT 0;
