package resilience

// DefaultRules returns a copy of the classifier's text table, first match
// wins. Extend it by prepending or appending rows:
//
//	c := resilience.Classifier{Rules: append([]resilience.TextRule{
//		{Name: "my_gateway_busy", Class: resilience.RateLimited, Any: []string{"gateway busy"}},
//	}, resilience.DefaultRules()...)}
//
// The order encodes the hard cases: quota before rate limits (a 429 saying
// insufficient_quota is quota_exhausted), per-minute quota before quota
// (Gemini's per-minute RESOURCE_EXHAUSTED is a rate limit), context length
// before rate limits (OpenAI's "Request too large … tokens per min" cannot
// succeed by waiting), the tool's own JSON and programming errors before
// provider-looking wrappers ("litellm.APIConnectionError: … KeyError") and
// before the transport rules (a tool not installed where it runs: "Failed to
// connect to stdio server …: spawn npx ENOENT"),
// a local model server's dead runner (provider_error) before the tool's own
// deaths (out of memory, panics, assertions: logic_error),
// retired models before credentials (Bedrock's "Access denied. This Model is
// marked by provider as Legacy" is not_supported), and token limits said in
// words only when they speak of no rate or quota, a gRPC message over the
// size limit before the rate limits (it says RESOURCE_EXHAUSTED),
// overload before generic server errors, and transport rules last, so that a
// body merely mentioning "timeout" is not a timeout. Among the transport
// rules, transient name resolution comes before unknown names, and
// connect-phase timeouts (the connection was never made: network_transient)
// and truncated streams come before the timeouts of a request that was sent
// and not answered (timeout), and a client's own "timeout of 30000ms
// exceeded" comes before the dropped connections (axios reports it as
// ECONNABORTED).
func DefaultRules() []TextRule {
	out := make([]TextRule, len(defaultRules))
	for i, r := range defaultRules {
		r.Codes = append([]string(nil), r.Codes...)
		r.Any = append([]string(nil), r.Any...)
		r.And = append([]string(nil), r.And...)
		r.Not = append([]string(nil), r.Not...)
		out[i] = r
	}
	return out
}

var defaultRules = []TextRule{
	// --- quota that waiting minutes will not restore ---------------------
	{
		// Gemini: 429 RESOURCE_EXHAUSTED with a per-day quota violation
		// (quotaId "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
		// metric "generate_requests_per_model_per_day").
		Name: "daily_quota", Class: QuotaExhausted,
		Any: []string{"perday", "per_day", "per day", "per-day", "daily limit", "daily quota", "requests per day"},
		// Also a per-day allowance said as a limit exceeded (OpenRouter "Rate
		// limit exceeded: free-models-per-day", "Token limit (500,000 per
		// day) exceeded"); Groq's "Rate limit reached … tokens per day (TPD)
		// … try again in 9m38s" says neither and stays a rate limit.
		And: []string{"quota", "resource_exhausted", "resource has been exhausted", "too many tokens", "too many requests", "exceeded"},
	},
	{
		// Gemini/Vertex: per-minute quotas are rate limits even though the text
		// says "quota" ("Quota exceeded for aiplatform.googleapis.com/
		// generate_content_requests_per_minute_per_project_per_base_model").
		Name: "per_minute_quota", Class: RateLimited,
		Any: []string{"perminute", "per_minute", "per minute", "per-minute"},
		And: []string{"quota", "resource_exhausted", "resource has been exhausted"},
	},
	{
		Name: "quota", Class: QuotaExhausted,
		Codes: []string{
			"insufficient_quota", "billing_hard_limit_reached", "insufficient_credits",
			"insufficient_balance", "billing_not_active", "billing_disabled", "quota_exceeded",
			"monthly_request_count", "budget_exceeded",
		},
		Any: []string{
			"insufficient_quota", "exceeded your current quota", "check your plan and billing",
			"billing hard limit", "billing_hard_limit", "credit balance is too low",
			"insufficient credits", "insufficient_credits", "insufficient balance",
			"requires more credits", "more credits are required", "can only afford",
			"out of credits", "purchase credits", "add more credits", "payment required",
			"quota exceeded", "quota has been exceeded", "exceeded your monthly",
			"monthly limit", "reached your specified api usage limits", "billing is not active",
			"billing_not_active", "billing has not been enabled", "spending limit",
			// Subscription and gateway budgets: "usage limit for this billing
			// cycle", "You've hit your monthly spend limit", "budget full".
			"billing cycle", "billing period", "spend limit", "monthly quota",
			"monthly usage limit", "monthly_request_count", "budget full",
			"budget has been exhausted", "budget exceeded", "exceeded your budget",
			// LiteLLM proxy budgets (BudgetExceededError): "Budget has been
			// exceeded! Current cost: 26.07, Max budget: 0.25", "crossed
			// budget: Exceeded budget for deployment", "over budget".
			"budget has been exceeded", "exceeded budget", "crossed budget", "over budget",
			"budgetexceedederror",
			// Prepaid balances (DeepSeek, SiliconFlow, Zhipu, Moonshot, new-api
			// gateways): "Your paid balance is insufficient. Please top up",
			// "Insufficient balance or no resource package. Please recharge",
			// "余额不足" (balance insufficient), "额度不足" (quota insufficient),
			// "请充值" (please recharge), "欠费" (in arrears).
			"balance is insufficient", "insufficient account balance", "please top up", "top up your",
			"please recharge", "arrearage", "余额不足", "额度不足", "请充值", "欠费",
		},
	},

	// --- the request is too big for the model ----------------------------
	{
		Name: "context_length", Class: ContextLength,
		Codes: []string{"context_length_exceeded", "context_window_exceeded", "request_too_large", "exceed_context_size_error"},
		Any: []string{
			"context_length_exceeded", "maximum context length", "context length exceeded",
			"context window", "contextwindowexceeded", "context_window_exceeded",
			"exceed context limit", "exceeds the context", "prompt is too long",
			"input is too long", "too many input tokens",
			"exceeds the maximum number of tokens", "input tokens exceed",
			"input token count", "too large for model", "length of all messages is too long",
			"reduce the length of the messages", "request too large for", "prompt too long",
			"maximum prompt length", "tokens exceeds the model", "exceeds max tokens",
			// Token counts against a limit, as local servers say it (also
			// under a 500): vLLM "Input prompt (N tokens) is too long and
			// exceeds limit of M", llama.cpp "the request exceeds the
			// available context size", "Context size has been exceeded",
			// llama-cpp-python "Requested tokens exceed context window of
			// 512", TGI "`inputs` tokens + `max_new_tokens` must be <= N" and
			// "`inputs` must have less than N tokens", Bedrock's "expected
			// maxLength: 42000, actual: 46735".
			"is too long and exceeds limit", "exceeds the available context size",
			"context size has been exceeded", "exceed context window", "exceeds context window",
			"tokens + `max_new_tokens` must be", "inputs tokens + max_new_tokens",
			"`inputs` must have less than", "expected maxlength:",
			// llama.cpp / llama-box: "input is too large to process. increase
			// the physical batch size", "input prompt is too big compared to
			// KV size".
			"increase the physical batch size", "too big compared to kv size",
			// vLLM: "The decoder prompt (length 17772) is longer than the
			// maximum model length of 16384", "Prompt length of 2048 is longer
			// than the maximum model length"; "`max_model_len` is no smaller".
			"maximum model length", "max model length", "max_model_len",
		},
	},
	{
		// An input or prompt length said to exceed a maximum (Volcano Engine
		// Ark "Input length 203743 exceeds the maximum length 202752",
		// "prompt length … is greater than …"), unless it speaks of a rate.
		Name: "input_length", Class: ContextLength,
		Any: []string{"input length", "prompt length", "input_length", "prompt_length"},
		And: []string{"exceed", "too long", "longer than", "greater than", "larger than", "more than"},
		Not: []string{"per minute", "per min", "per day", "rate limit", "quota", "throttl"},
	},
	{
		// A token limit, said in words: Bedrock "The maximum tokens you
		// requested exceed the model limit of 4096", Azure "Could not finish
		// the message because max_tokens or model output limit was reached".
		// Not a limit per minute or per day (those are rate limits and
		// quotas, below).
		Name: "token_limit", Class: ContextLength,
		Any: []string{
			"maximum tokens", "maximum number of tokens", "max tokens", "token limit",
			"tokens limit", "output limit", "exceed the model limit", "exceeds the model limit",
		},
		And: []string{
			"exceed", "too large", "too long", "greater than", "larger than", "more than",
			"was reached", "limit reached", "lower than", "less than",
		},
		Not: []string{
			"per minute", "per min", "per day", "per hour", "per second", "rate limit", "ratelimit",
			"tpm", "rpm", "please wait", "quota", "credits", "can only afford", "throttl", "budget",
		},
	},
	{
		// max_tokens above what the model can produce: "max_tokens is too
		// large: 6000. This model supports at most 4096 completion tokens",
		// "max_tokens: 128001 > 64000, which is the maximum allowed number of
		// output tokens", "max_tokens … integer above maximum value".
		Name: "max_tokens_too_large", Class: ContextLength,
		Any: []string{"max_tokens", "max_completion_tokens", "max_output_tokens", "maxoutputtokens", "max_tokens_to_sample", "maxtokens", "max_new_tokens"},
		And: []string{
			"too large", "maximum allowed", "supports at most", "at most", "above maximum", "must be <=",
			"exceed", "is not valid", "less than or equal", "> ", "too high",
		},
		// A max_tokens allowed only when streaming (Fireworks "Requests with
		// max_tokens > 4096 must have stream=true", Anthropic "Streaming is
		// required when max_tokens is greater than …") is a request to
		// change, not a size: invalid_request.
		Not: []string{"credits", "can only afford", "stream=true", "streaming is required", "streaming is strongly recommended", "must be streamed", "requires streaming"},
	},
	{
		// Bedrock's range check on the output-token parameter: "Malformed input
		// request: 8192 is not less or equal to 8191".
		Name: "bedrock_output_tokens", Class: ContextLength,
		Any: []string{"is not less or equal to"},
		And: []string{"malformed input request"},
	},
	{
		// "too many tokens" is the request's size unless it speaks of a rate
		// ("Too many tokens, please wait", "Tokens per Minute").
		Name: "too_many_tokens", Class: ContextLength,
		Any: []string{"too many tokens"},
		Not: []string{"per minute", "per min", "rate limit", "please wait", "throttl", "try again"},
	},

	{
		// A gRPC message over the channel's size limit ("rpc error: code =
		// ResourceExhausted desc = grpc: received message larger than max
		// (4977817 vs. 4194304)", grpc-node "8 RESOURCE_EXHAUSTED: Received
		// message larger than max"): RESOURCE_EXHAUSTED, but no rate limit;
		// the same message is too large again, whatever the wait.
		Name: "grpc_message_too_large", Class: InvalidRequest,
		Any: []string{"message larger than max", "trying to send message larger than"},
	},

	// --- slow down -------------------------------------------------------
	{
		// Anthropic 529 overloaded_error, Gemini 503 "The model is overloaded"
		// and "experiencing high demand", Azure "high demand … retry after".
		Name: "overloaded", Class: RateLimited,
		// Also capacity that is not a 429: Mistral's "Service tier capacity
		// exceeded for this model" (typed invalid_request_error), Google's
		// MODEL_CAPACITY_EXHAUSTED "No capacity available for model",
		// Vertex's "temporarily out of capacity".
		Codes: []string{"overloaded_error", "overloaded", "model_capacity_exhausted"},
		Any: []string{
			"overloaded", "high demand", "at capacity", "server is busy", "servers are busy",
			"capacity exceeded", "no capacity available", "model_capacity_exhausted", "out of capacity",
			// Bedrock's throttles and overloads, whatever the exception name
			// (ServiceUnavailableException, ThrottlingException): "Too many
			// connections, please wait before trying again", "Too many
			// requests, please wait before trying again".
			"too many connections", "please wait before trying again",
		},
	},
	{
		Name: "rate_limit", Class: RateLimited,
		Codes: []string{
			"rate_limit_exceeded", "rate_limit_error", "rate_limited", "ratelimitexceeded",
			"resource_exhausted", "too_many_requests", "throttlingexception", "throttling_error",
		},
		Any: []string{
			"rate limit", "rate_limit", "ratelimit", "rate-limit", "too many requests",
			"too_many_requests", "toomanyrequests", "resource_exhausted", "resource has been exhausted",
			"throttl", "tokens per min", "requests per min", "slow down", "too many tokens",
			"resourceexhausted", "toomanyrequestserror", "request limit reached",
		},
	},

	// --- the tool or agent itself failed (even inside a provider-looking
	// message; not when the runner saw the status itself) -------------------
	{
		// A local model server's runner died (Ollama "llama runner process
		// has terminated: exit status 2", even with a GGML_ASSERT): the
		// backend failed, not the tool; checked before the tool's own deaths.
		Name: "model_runner_died", Class: ProviderError,
		Any: []string{"llama runner process has terminated", "llama runner terminated", "error loading llama server"},
	},
	{
		// The tool's own process died: out of memory (V8 "JavaScript heap out
		// of memory", Go "fatal error: runtime: out of memory" / "cannot
		// allocate memory", the kernel's "Out of memory: Killed process", an
		// OOMKilled container, exit 137), a Rust panic, a failed assertion, a
		// segfault or abort, a dead worker pool, or a parser that could not
		// read the model's output. Retrying the same input does the same;
		// the backend is not at fault.
		Name: "tool_died", Class: LogicError, Scope: ScopeText,
		Any: []string{
			"javascript heap out of memory", "runtime: out of memory", "runtime: cannot allocate memory",
			"out of memory: killed process", "oom-kill", "oomkilled", "oom killer", "killed due to memory pressure",
			"exit code 137", "exit status 137", "exit code 139", "exit status 139", "exit code 134", "exit status 134",
			"exited with code 137", "exited with code 139", "exited with code 134",
			"signal: killed", "signal: segmentation fault", "signal: aborted",
			"memoryerror", "outofmemoryerror", "cuda out of memory", "std::bad_alloc",
			"cudamalloc failed", "cuda error: out of memory",
			"exited with code -9", "exit code -9", "exit status -9", "signals.sigkill", "sigkill",
			"out of memory: kill process", "killed process",
			"panicked at", "rust_backtrace", "assertion failed", "assertionerror", "assertion `", "assertion '",
			"ggml_assert", "segmentation fault", "sigsegv", "sigabrt", "core dumped", "abort() has been called",
			"brokenprocesspool", "terminated abruptly", "worker process died", "worker died", "child process died",
			"could not parse llm output", "outputparserexception", "output_parsing_failure",
			// Runaway recursion: Python RecursionError, Java StackOverflowError,
			// V8 "Maximum call stack size exceeded", Rust "has overflowed its
			// stack", Go "goroutine stack exceeds" / "fatal error: stack overflow".
			"recursionerror", "maximum recursion depth exceeded", "stackoverflowerror",
			"maximum call stack size exceeded", "has overflowed its stack", "goroutine stack exceeds",
			"fatal error: stack overflow",
		},
	},
	{
		// The tool's sandbox could not start or run it: the OCI runtime
		// (runc, crun) failed to create or exec the container ("OCI runtime
		// create failed: container_linux.go:380: starting container process
		// caused: …"). The same configuration fails the same way; the backend
		// is not at fault.
		Name: "sandbox_failed", Class: LogicError, Scope: ScopeText,
		Any: []string{
			"oci runtime create failed", "oci runtime exec failed", "oci runtime start failed",
			"oci runtime error", "starting container process caused", "container init caused",
		},
	},
	{
		// The tool (or the server it launches, such as an MCP stdio server)
		// is not installed where it runs: Node "spawn uvx ENOENT", Go
		// 'exec: "npx": executable file not found in $PATH', a shell's
		// "command not found", Windows' "is not recognized as an internal or
		// external command". The same deployment fails the same way; checked
		// before the transport rules, because a wrapper may say "Failed to
		// connect to stdio server …: spawn npx ENOENT".
		Name: "tool_not_installed", Class: LogicError, Scope: ScopeText,
		Any: []string{
			"executable file not found", "command not found", "is not recognized as an internal or external command",
			// uv/uvx: "error: Failed to spawn: `mysql_mcp_server` Caused by:
			// program not found".
			"failed to spawn: `", "program not found",
		},
	},
	{
		// Node's child_process: "spawn <file> ENOENT" (the file to spawn does
		// not exist).
		Name: "spawn_enoent", Class: LogicError, Scope: ScopeText,
		Any: []string{"spawn "},
		And: []string{" enoent"},
		Not: []string{"enoent: no such file or directory, open", "enoent: no such file or directory, stat"},
	},
	{
		// A JSON parse failure in the tool or its SDK: Go "json: cannot
		// unmarshal", "invalid character … looking for beginning of value",
		// "unexpected end of JSON input"; Python JSONDecodeError "Expecting
		// value", "Expecting property name enclosed in double quotes"; V8
		// "Expected double-quoted property name in JSON", "… is not valid
		// JSON". Also when the text shows an HTML page where JSON was
		// expected ("Unexpected token '<', "<!DOCTYPE "..."): the tool read
		// a page it cannot use, and retrying it reads the same page (issue
		// #24). A page the runner itself received with an HTTP status is
		// classified by that status (this rule is ScopeText).
		Name: "json_parse", Class: LogicError, Scope: ScopeText,
		Any: []string{
			"cannot unmarshal", "looking for beginning of value", "unexpected end of json input",
			"jsondecodeerror", "json.decoder", "expecting value: line", "expecting property name enclosed",
			"expected double-quoted property name", "after property value in json",
			"is not valid json", "json parse error", "unexpected token in json", "in json at position",
			"unterminated string starting at", "invalid control character at", "extra data: line",
			"json.parse:", "could not parse json", "failed to parse json", "jsonparseexception",
			"jsonmappingexception", "mismatchedinputexception", "jsonexception", "formatexception: unexpected character",
			"serde_json", "expected value at line",
		},
	},
	{
		// A traceback of a programming error in the tool (or in a library it
		// runs in-process, such as LiteLLM): KeyError, AttributeError,
		// UnboundLocalError, … even when the wrapper says APIConnectionError.
		Name: "tool_traceback", Class: LogicError, Scope: ScopeText,
		Any: []string{
			"keyerror:", "attributeerror:", "nameerror:", "indexerror:", "unboundlocalerror",
			"zerodivisionerror", "cannot access local variable", "object has no attribute",
			"is not subscriptable", "nullpointerexception", "classcastexception",
			"panic: runtime error", "nil pointer dereference", "object reference not set to an instance",
			// A Go panic whose "panic:" prefix a wrapper dropped ("Caught
			// panic:\n\nruntime error: index out of range [0] with length 0").
			"runtime error: index out of range", "runtime error: slice bounds out of range",
			"runtime error: invalid memory address", "runtime error: integer divide by zero",
		},
		// "InvalidAPIKeyError: Invalid API key" is a credential, not a KeyError.
		Not: []string{"apikeyerror"},
	},

	// --- the caller's fault ----------------------------------------------
	{
		// A model the provider has retired: Bedrock "This model version has
		// reached the end of its life", "Access denied. This Model is marked
		// by provider as Legacy and you have not been actively using the
		// model". No retry brings it back; checked before auth because the
		// text may say "access denied".
		Name: "model_retired", Class: NotSupported,
		Any: []string{
			"end of its life", "end-of-life", "reached end of life", "marked by provider as legacy",
			"model is marked as legacy", "model has been deprecated", "model has been retired",
			"model is deprecated", "model was deprecated", "model has reached its end",
			"upgrade to an active model",
		},
	},
	{
		// 401/403: credentials and permissions are configuration errors; they
		// are dead-lettered and never trip a breaker.
		Name: "auth", Class: InvalidRequest,
		Codes: []string{
			"invalid_api_key", "authentication_error", "permission_error", "permission_denied",
			"unauthenticated", "unauthorized", "invalid_authentication", "access_denied",
			"authenticationerror", "permissiondeniederror", "accessdeniedexception", "accessdenied",
		},
		Any: []string{
			"incorrect api key", "invalid api key", "invalid_api_key", "invalid x-api-key",
			"api key not valid", "no auth credentials", "authentication_error",
			"authenticationerror", "permissiondeniederror", "permission denied",
			"unauthorized", "missing api key", "api key is missing", "invalid authentication",
			"could not validate credentials", "you didn't provide an api key",
			// Credentials refused, whatever the client: a database's or a
			// broker's login, also inside a "failed to connect".
			"incorrect username or password", "invalid username/password", "invalid username or password",
			"password authentication failed", "access denied for user", "login failed for user",
			"logon denied", "authorization violation", "authentication failed",
			// Access and subscription: Bedrock AccessDeniedException "You
			// don't have access to the model", "Model access is denied", "not
			// authorized to invoke", "requires a Pro subscription"; gRPC
			// PERMISSION_DENIED and UNAUTHENTICATED.
			"accessdeniedexception", "access denied", "don't have access to the model",
			"do not have access to the model", "model access is denied", "not authorized to",
			"requires a pro subscription", "requires a subscription", "subscription required",
			"code = permissiondenied", "code = unauthenticated", "invalid api token",
			"security token included in the request is invalid",
			// Cloud credentials missing or expired: botocore NoCredentialsError
			// "Unable to locate credentials", AWS SDK v3 "Could not load
			// credentials from any providers", STS "ExpiredToken: The security
			// token included in the request is expired".
			"unable to locate credentials", "nocredentialserror", "could not load credentials",
			"included in the request is expired", "expiredtoken", "token has expired", "token is expired",
			// kubectl "You must be logged in to the server (the server has
			// asked for the client to provide credentials)", GitHub "Bad
			// credentials".
			"must be logged in", "provide credentials", "bad credentials", "badcredentialsexception",
			// A proxy that wants credentials (407): "Tunnel connection failed:
			// 407 Proxy Authentication Required".
			"proxy authentication required",
		},
	},
	{
		// A tool the server does not have, said through MCP's JSON-RPC
		// ("MCP error -32602: Tool get_weather not found"): no retry can make
		// it appear. Invalid tool arguments are invalid_request (below).
		Name: "tool_not_found", Class: NotSupported,
		Any: []string{"mcp error", "mcperror", "tools/call"},
		And: []string{"not found", "unknown tool", "no such tool"},
		// A tool that ran and missed a file is not a missing tool.
		Not: []string{"file not found", "no such file", "filenotfound", "enoent"},
	},
	{
		// A model, endpoint, method or feature the backend does not have: gRPC
		// UNIMPLEMENTED, "does not support tools", "Function calling is not
		// enabled for models/…", UnsupportedOperationException. No retry, no
		// breaker.
		Name: "not_supported", Class: NotSupported,
		Codes: []string{
			"model_not_found", "not_implemented", "unsupported_model", "unsupported_country_region_territory",
			"unimplemented", "model_decommissioned", "deploymentnotfound", "model_not_available",
			"dedicated_endpoint_not_running", "invalid_model", "invalid_model_id",
		},
		Any: []string{
			"model_not_found", "model not found", "no such model", "unknown model",
			"does not exist or you do not have access", "no endpoints found",
			"is not supported", "not supported", "unsupported model", "unsupported_model",
			"not implemented", "notfounderror", "does not support", "doesn't support",
			"unimplemented", "is unsupported", "unsupported operation", "unsupportedoperation",
			"unsupportedfeature", "notsupportedexception", "is not enabled for", "method not found",
			"unknown service",
			// Decommissioned models, missing deployments, unsupported
			// tool-choice settings: Groq "has been decommissioned", Azure
			// DeploymentNotFound, vLLM '"auto" tool choice requires
			// --enable-auto-tool-choice', Bedrock "with on-demand throughput
			// isn’t supported".
			"has been decommissioned", "model_decommissioned",
			"deploymentnotfound", "api deployment for this resource does not exist",
			"api deployment for the resource does not exist", "tool choice requires",
			"isn't supported", "isn’t supported", "unable to access non-serverless model",
			"dedicated endpoint for", "not found, make sure the correct model",
			// "That model does not exist" (OpenAI, without a model name).
			"model does not exist", "model doesn't exist",
			// A model name the backend does not know: Perplexity "Invalid
			// model 'sonar-small-online'. Permitted models can be found…"
			// (type invalid_model), OpenRouter "… is not a valid model ID",
			// LiteLLM "Invalid model name passed in model=…", "Invalid model.
			// Please select a different model" (reason INVALID_MODEL_ID).
			"invalid model '", "invalid model \"", "invalid model.", "invalid model name",
			"is not a valid model", "permitted models can be found",
			"unknown tool", "tool not found", "no such tool",
			// Ollama "model 'llama2' not found, try pulling it first"; Bedrock
			// "The provided model identifier is invalid".
			"try pulling it first", "model identifier is invalid", "invalid model identifier",
			"invalid model id",
		},
		Not: []string{"modulenotfounderror", "filenotfounderror", "please use a valid", "enotfound", "hostnotfound", "servernotfound", "host not found"},
	},
	{
		// A model named in quotes that the server does not have: Ollama
		// "model 'codellama:7b' not found", 'model "mistral" not found'.
		Name: "model_name_not_found", Class: NotSupported,
		Any: []string{"model '", "model \"", "model `", "model “"},
		And: []string{"' not found", "\" not found", "` not found", "” not found", "' does not exist", "\" does not exist", "` does not exist"},
		Not: []string{"file not found", "no such file", "filenotfound", "modulenotfound"},
	},
	{
		Name: "invalid_request", Class: InvalidRequest,
		Codes: []string{
			"invalid_request_error", "invalid_argument", "bad_request", "validation_error",
			"invalid_value", "invalid_request", "unprocessable_entity", "failed_precondition",
			"badrequesterror", "unprocessableentityerror", "content_filter", "responsibleaipolicyviolation",
			"invalid_prompt", "content_policy_violation",
			// Zod's schema validation of a tool call's arguments (MCP servers
			// in TypeScript): [{"code": "invalid_type", "expected": "object",
			// "received": "string", …}].
			"invalid_type", "invalid_union", "invalid_enum_value",
		},
		Any: []string{
			"badrequesterror", "unprocessableentityerror", "validationexception",
			"invalid json payload received", "invalid_argument",
			// A prompt a content policy refused (Azure content_filter): it
			// must change before it can succeed.
			"content management policy", "content_filter", "responsibleaipolicyviolation",
			"code = invalidargument", "code = failedprecondition",
			// Gemini's safety and recitation blocks ("[GoogleGenerativeAI
			// Error]: Candidate was blocked due to SAFETY", "Message is being
			// blocked for reason: SAFETY", blockReason in promptFeedback): the
			// same prompt is blocked again.
			"candidate was blocked", "blocked due to safety", "blocked due to recitation",
			"blocked for reason: safety", "blocked for reason: recitation", "blockreason",
			// MCP's JSON-RPC invalid params (-32602): the tool call's arguments
			// do not fit its schema.
			"mcp error -32602", "invalid arguments for tool", "invalid tool arguments",
			// Cohere: "invalid request: message must be at least 1 token long".
			"invalid request: ",
			// A conversation whose tool calls and results do not pair up
			// (Anthropic: "unexpected `tool_use_id` found in `tool_result`
			// blocks … Each `tool_result` block must have a corresponding
			// `tool_use` block", "`tool_use` ids were found without
			// `tool_result` blocks immediately after").
			"must have a corresponding", "tool_use_id", "ids were found without",
			// A prompt a usage policy refused (OpenAI invalid_prompt: "your
			// prompt was flagged as potentially violating our usage policy").
			"invalid prompt:", "flagged as potentially violating", "usage policy",
			"content policy", "content_policy_violation",
			// A repository the caller named that does not exist for it (git
			// "remote: Repository not found.", docker "repository does not
			// exist").
			"repository not found", "repository does not exist",
		},
		Not: []string{"request uri"},
	},
	{
		Name: "server_error", Class: ProviderError,
		Codes: []string{"api_error", "server_error", "internal_error", "internal", "internal_server_error", "unavailable", "service_unavailable"},
		Any: []string{
			"internalservererror", "internal server error", "server had an error", "bad gateway",
			"service unavailable", "unexpected internal error",
		},
		// A wrapper that calls a certificate failure a server error
		// ("litellm.InternalServerError: AnthropicException - [SSL:
		// CERTIFICATE_VERIFY_FAILED] …") is the certificate failure.
		Not: []string{"certificate verify failed", "certificate_verify_failed"},
	},

	// --- the network (only when no status, or a 5xx) ---------------------
	{
		// The resolver failed; the name may well exist: getaddrinfo EAI_AGAIN
		// and EBUSY, Windows WSATRY_AGAIN (11002), c-ares "Could not contact
		// DNS servers", a DNS timeout.
		Name: "dns_temporary", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{
			"temporary failure in name resolution", "eai_again", "server misbehaving",
			"getaddrinfo ebusy", "errno 11002", "gaierror(11002", "(11002)", "wsatry_again",
			"could not contact dns servers", "temporary error during hostname resolution",
			"non-authoritative host not found", "lookup address information: try again",
			"dns server returned servfail", "dns lookup timed out", "dns resolution timed out",
			"err_name_resolution_failed",
		},
	},
	{
		Name: "tls_certificate", Class: NetworkPermanent, Scope: ScopeTransport,
		Any: []string{
			"x509:", "certificate signed by unknown authority", "certificate verify failed",
			"certificate_verify_failed", "sslcertverificationerror", "self signed certificate",
			"self-signed certificate", "self_signed_cert_in_chain", "depth_zero_self_signed_cert",
			"unable_to_verify_leaf_signature", "unable to get local issuer certificate",
			"certificate has expired", "cert_has_expired", "err_tls_cert_altname_invalid",
			"certificate is not valid for", "tls: failed to verify certificate",
			"tls: handshake failure", "wrong version number", "first record does not look like a tls handshake",
			"certpathvalidatorexception", "unable to find valid certification path",
			"handshakeexception: handshake error", "certificate_verify_failed",
			"the remote certificate is invalid",
			// Chromium (Playwright, Puppeteer): net::ERR_CERT_AUTHORITY_INVALID,
			// ERR_CERT_DATE_INVALID, ERR_SSL_PROTOCOL_ERROR.
			"err_cert_", "err_ssl_protocol_error", "err_ssl_version_or_cipher_mismatch",
		},
	},
	{
		// The name does not exist (NXDOMAIN, Windows WSAHOST_NOT_FOUND 11001,
		// localised "host unknown"), an address not valid in its context
		// (WSAEADDRNOTAVAIL 10049), or a URL without a scheme.
		Name: "dns_not_found", Class: NetworkPermanent, Scope: ScopeTransport,
		Any: []string{
			"no such host", "name or service not known", "nodename nor servname provided",
			"getaddrinfo enotfound", "'enotfound'", "\"enotfound\"", "name does not resolve", "could not resolve host", "nameresolutionerror",
			"hostnotfound", "servernotfounderror", "unable to find the server", "could not be resolved",
			"errno 11001", "gaierror(11001", "(11001)", "unknownhostexception", "unable to resolve host",
			"failed host lookup", "no address associated with hostname", "answer with no data",
			"nxdomain", "host is unknown", "host unknown", "unbekannt", "hôte inconnu",
			"host desconocido", "host não é conhecido", "хост неизвестен", "不知道这样的主机", "不明なホスト", "ホストは不明",
			"not valid in its context", "地址无效", "(10049)",
			"unsupported protocol scheme", "err_invalid_url", "invalid url", "missingschema",
			"no scheme supplied", "no schema supplied", "unsupportedprotocol", "unsupported url protocol",
			"missing an 'http://' or 'https://' protocol", "only absolute urls are supported",
			"no host specified in uri", "undefined scheme", "expected url scheme",
			"invalid request uri was provided", "invalidschema", "no connection adapters were found",
			// Chromium: "page.goto: net::ERR_NAME_NOT_RESOLVED at https://…".
			"err_name_not_resolved",
		},
	},
	{
		// A timeout before the connection was made: the request was never
		// sent. Dial and connect timeouts (Go "dial tcp …: i/o timeout", Node
		// "connect ETIMEDOUT", undici UND_ERR_CONNECT_TIMEOUT, urllib3
		// ConnectTimeoutError, Java "connect timed out", .NET 10060, dio
		// connection timeout), a TLS handshake timeout, "Cannot connect to API".
		Name: "connect_timeout", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{
			"tls handshake timeout", "handshake timed out", "connect etimedout", "connect timeout",
			"connecttimeout", "connect_timeout", "connect timed out", "connection timed out: connect",
			"err_socket_connection_timeout", "socket connection timeout", "connecting timed out",
			"[connection timeout]", "request connection took longer", "error trying to connect",
			"tcp connect error", "failed to establish a new connection", "cannot connect to api",
			"unable to connect to api", "did not properly respond after a period of time",
			"remote party did not respond", "winerror 10060", "(10060)", "os error 10060",
			"tentativa de conexão falhou", "连接尝试失败", "connect call failed", "cannot connect to host",
			"err_connection_timed_out",
		},
		Not: []string{"read timed out", "read timeout"},
	},
	{
		Name: "dial_timeout", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{"dial tcp", "dial udp", "connectex", "etimedout", "socketexception"},
		And: []string{"i/o timeout", "timed out", "timeout", "connect"},
		Not: []string{
			"read etimedout", "read timed out", "awaiting headers", "while reading body", "receive", "httpclient.timeout",
			"exceeded the configured timeout", "unable to read data from the transport connection",
		},
	},
	{
		// A truncated response: the connection closed before the body was
		// complete. Retrying may well succeed.
		Name: "stream_truncated", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{
			"unexpected end of stream", "premature close", "prematurely closed", "premature eof",
			"premature end of", "ended prematurely", "premature_eof", "incomplete chunked read",
			"response payload is not completed", "end of file before message length reached",
			"unexpected end of file", "connection closed while receiving data",
			"connection closed before full header", "connection closed before response",
			"\\n not found: limit=0", "incompleteread", "chunkedencodingerror", "transferencodingerror",
			"unexpected eof", "clientpayloaderror",
			// Rust hyper: "parsed HTTP message from remote is incomplete",
			// Error { kind: Incomplete } (the connection closed before the
			// response was complete).
			"message from remote is incomplete", "message is incomplete", "kind: incomplete",
		},
	},
	{
		// A client's own timer: axios "timeout of 30000ms exceeded" (code
		// ECONNABORTED, which is not a dropped connection), Puppeteer
		// "Navigation timeout of 30000 ms exceeded", Playwright "Timeout
		// 30000ms exceeded".
		Name: "timeout_ms_exceeded", Class: Timeout, Scope: ScopeTransport,
		Any: []string{"ms exceeded"},
		And: []string{"timeout"},
	},
	{
		// The connect phase, said in words rather than an errno: a timeout
		// while connecting ("Connection timed out" is connect(2)'s
		// ETIMEDOUT; "Fail connecting to server … Timeout"; ssh's "connect
		// to host … timed out", "banner exchange"), or a timeout beside a
		// refused or unreachable connection (pymongo's server selection):
		// the request was never sent.
		Name: "connect_phase_timeout", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{
			"connection timed out", "fail connecting", "failed connecting", "failed to connect",
			"could not connect", "couldn't connect", "unable to connect", "connect to host",
			"connection refused", "errno 111", "unreachable", "banner",
		},
		And: []string{"timed out", "timeout", "etimedout"},
		Not: []string{"read timed out", "read timeout", "response timeout", "waiting for response", "timeout passed", "522"},
	},
	{
		// The request was sent and not answered in time.
		Name: "transport_timeout", Class: Timeout, Scope: ScopeTransport,
		Any: []string{
			"deadline exceeded", "deadline_exceeded", "deadlineexceeded", "i/o timeout",
			"timeout exceeded", "timed out", "timedout", "etimedout",
			"und_err_headers_timeout", "und_err_body_timeout", "headers timeout", "body timeout", "readtimeout",
			"writetimeout", "pooltimeout", "apitimeouterror", "timeouterror", "gateway timeout",
			"gateway time-out", "awaiting headers", "httpclient.timeout", "sockettimeoutexception",
			"interruptedioexception: timeout", "receive timeout", "receiving data timeout", "receivetimeout",
			"net::err_timed_out",
		},
	},
	{
		Name: "transport_transient", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{
			"connection reset", "econnreset", "broken pipe", "epipe", "connection refused",
			"econnrefused", "connection aborted", "econnaborted", ": eof",
			"server sent goaway", "goaway", "fetch failed", "und_err_socket", "other side closed",
			"socket hang up", "network is unreachable", "enetunreach", "no route to host",
			"ehostunreach", "host is unreachable", "server disconnected", "remoteprotocolerror",
			"remote end closed connection", "connection closed", "connection error",
			"apiconnectionerror", "connecterror", "connectionerror", "clientconnectorerror",
			"max retries exceeded with url", "peer closed connection",
			" stream error", "protocol_error", "internal_error; received from peer",
			"upstream connect error", "network error", "networkerror", "err_network",
			"connectexception", "failed to connect to",
			// gRPC UNAVAILABLE from a client ("rpc error: code = Unavailable
			// desc = connection closed", "14 UNAVAILABLE: No connection
			// established"); an overloaded server saying so is rate_limited.
			"code = unavailable", "code = 14 desc", "14 unavailable:", "status{code=unavailable",
			"the connection is unavailable", "transport is closing", "connection was closed unexpectedly",
			// grpc-java and gax: "io.grpc.StatusRuntimeException: UNAVAILABLE:
			// io exception", "com.google.api.gax.rpc.UnavailableException".
			"statusruntimeexception: unavailable", "rpc.unavailableexception",
			// The server closed the connection: aiohttp ServerDisconnectedError,
			// undici "SocketError: closed", hyper's ChannelClosed
			// ("hyper_util::client::legacy::Error(SendRequest,
			// hyper::Error(ChannelClosed))").
			"serverdisconnectederror", "socketerror: closed", "channelclosed",
			// Windows WSAECONNRESET (10054): "wsarecv: An existing connection
			// was forcibly closed by the remote host".
			"forcibly closed", "wsarecv:", "wsasend:", "winerror 10054", "(10054)", "os error 10054",
			// Go: "http2: client connection lost", "http2: client connection
			// force closed", "http: server closed idle connection", "use of
			// closed network connection", "net/http: HTTP/1.x transport
			// connection broken"; grpc-go "the client transport was broken".
			"client connection lost", "connection force closed", "server closed idle connection",
			"use of closed network connection", "transport connection broken", "transport was broken",
			"client conn not usable",
			// Windows WSAECONNREFUSED (10061): "No connection could be made
			// because the target machine actively refused it".
			"actively refused", "winerror 10061", "(10061)", "os error 10061",
			// curl (52) "Empty reply from server": the server closed the
			// connection without answering; undici "TypeError: terminated"
			// (the response body's socket closed).
			"empty reply from server", "typeerror: terminated",
			// Chromium's connection errors (Playwright, Puppeteer): net::
			// ERR_CONNECTION_REFUSED, _RESET, _CLOSED, ERR_EMPTY_RESPONSE,
			// ERR_INTERNET_DISCONNECTED, ERR_TUNNEL_CONNECTION_FAILED, …;
			// gRPC's "Transport closed".
			"err_connection_", "err_empty_response", "err_internet_disconnected", "err_address_unreachable",
			"err_tunnel_connection_failed", "err_proxy_connection_failed", "transport closed",
			// Node: "Client network socket disconnected before secure TLS
			// connection was established".
			"socket disconnected before secure tls",
		},
	},
	{
		// The call was canceled or aborted by its caller (AbortController,
		// asyncio cancellation, a canceled context), not timed out.
		Name: "canceled", Class: Canceled, Scope: ScopeNoStatus,
		Any: []string{
			"request was aborted", "user aborted a request", "operation aborted", "aborterror",
			"cancellederror", "context canceled", "operation was canceled", "operation was cancelled",
			"task was canceled", "task was cancelled", "statuscode.cancelled", "code = canceled",
			"request canceled", "request cancelled", "apiuseraborterror",
		},
		Not: []string{"timeout", "timed out", "deadline"},
	},
	{
		// Any other mention of a timeout in a tool's own output.
		Name: "timeout_word", Class: Timeout, Scope: ScopeNoStatus,
		Any: []string{"timeout"},
	},

	// --- the agent itself is broken (text only) --------------------------
	{
		// Programming and deployment errors in a tool: retrying cannot help,
		// and the backend is not at fault. Checked after the transport rules,
		// so Node's "TypeError: fetch failed" stays a network error.
		Name: "agent_bug", Class: LogicError, Scope: ScopeNoStatus,
		Any: []string{
			"panic: runtime error", "nil pointer dereference", "modulenotfounderror",
			"importerror:", "syntaxerror:", "nameerror:", "attributeerror:", "keyerror:",
			"indexerror:", "typeerror:", "referenceerror:", "cannot find module",
			"executable file not found",
			"command not found", "zerodivisionerror", "unboundlocalerror",
		},
	},

	// --- meanings, last: what no phrase above named -----------------------
	{
		// A quota said spent, with no rate period: a balance, a lifetime
		// or a regional allowance (also under a 403 or 429).
		Name: "quota_spent", Class: QuotaExhausted,
		Any: []string{"quota"},
		And: []string{"exceeded", "insufficient", "exhausted", "has been reached", "over your", "used up"},
		Not: []string{
			"per minute", "per second", "per hour", "perminute", "per_minute", "requests per",
			"tokens per", "rpm", "tpm", "rate", "try again in", "retry in", "please wait",
		},
	},
	{
		// Token counts against a limit, said in any words: the input is
		// too long for the model (not a rate: no period).
		Name: "token_count_limit", Class: ContextLength,
		Any: []string{"tokens", "token count", "n_ctx"},
		And: []string{"exceed", "max allowed", "maximum", "too many tokens", "too long", "larger than"},
		Not: []string{
			"per minute", "per day", "per second", "per hour", "rate limit", "rpm", "tpm", "tpd",
			"quota", "budget", "credit",
		},
	},
}
