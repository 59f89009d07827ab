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
// succeed by waiting), overload before generic server errors, and transport
// rules last, so that a body merely mentioning "timeout" is not a timeout.
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
		And: []string{"quota", "resource_exhausted", "resource has been exhausted"},
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
		},
	},

	// --- the request is too big for the model ----------------------------
	{
		Name: "context_length", Class: ContextLength,
		Codes: []string{"context_length_exceeded", "context_window_exceeded", "request_too_large"},
		Any: []string{
			"context_length_exceeded", "maximum context length", "context length exceeded",
			"context window", "contextwindowexceeded", "context_window_exceeded",
			"exceed context limit", "exceeds the context", "prompt is too long",
			"input is too long", "too many input tokens", "too many tokens",
			"exceeds the maximum number of tokens", "input tokens exceed",
			"input token count", "too large for model", "length of all messages is too long",
			"reduce the length of the messages", "request too large for", "prompt too long",
			"maximum prompt length", "tokens exceeds the model", "exceeds max tokens",
		},
	},

	// --- slow down -------------------------------------------------------
	{
		// Anthropic 529 overloaded_error, Gemini 503 "The model is overloaded"
		// and "experiencing high demand", Azure "high demand … retry after".
		Name: "overloaded", Class: RateLimited,
		Codes: []string{"overloaded_error", "overloaded"},
		Any:   []string{"overloaded", "high demand", "at capacity", "server is busy", "servers are busy"},
	},
	{
		Name: "rate_limit", Class: RateLimited,
		Codes: []string{
			"rate_limit_exceeded", "rate_limit_error", "rate_limited", "ratelimitexceeded",
			"resource_exhausted", "too_many_requests", "throttlingexception", "throttling_error",
		},
		Any: []string{
			"rate limit", "rate_limit", "ratelimit", "rate-limit", "too many requests",
			"resource_exhausted", "resource has been exhausted", "throttl",
			"tokens per min", "requests per min", "slow down",
		},
	},

	// --- the caller's fault ----------------------------------------------
	{
		// 401/403: credentials and permissions are configuration errors; they
		// are dead-lettered and never trip a breaker.
		Name: "auth", Class: InvalidRequest,
		Codes: []string{
			"invalid_api_key", "authentication_error", "permission_error", "permission_denied",
			"unauthenticated", "unauthorized", "invalid_authentication", "access_denied",
			"authenticationerror", "permissiondeniederror",
		},
		Any: []string{
			"incorrect api key", "invalid api key", "invalid_api_key", "invalid x-api-key",
			"api key not valid", "no auth credentials", "authentication_error",
			"authenticationerror", "permissiondeniederror", "permission denied",
			"unauthorized", "missing api key", "api key is missing", "invalid authentication",
			"could not validate credentials", "you didn't provide an api key",
		},
	},
	{
		// A model or endpoint the backend does not have: no retry, no breaker.
		Name: "not_supported", Class: NotSupported,
		Codes: []string{"model_not_found", "not_implemented", "unsupported_model", "unsupported_country_region_territory", "unimplemented"},
		Any: []string{
			"model_not_found", "model not found", "no such model", "unknown model",
			"does not exist or you do not have access", "no endpoints found",
			"is not supported", "not supported", "unsupported model", "unsupported_model",
			"not implemented", "notfounderror",
		},
		Not: []string{"modulenotfounderror", "filenotfounderror"},
	},
	{
		Name: "invalid_request", Class: InvalidRequest,
		Codes: []string{
			"invalid_request_error", "invalid_argument", "bad_request", "validation_error",
			"invalid_value", "invalid_request", "unprocessable_entity", "failed_precondition",
			"badrequesterror", "unprocessableentityerror",
		},
		Any: []string{"badrequesterror", "unprocessableentityerror", "validationexception"},
	},
	{
		Name: "server_error", Class: ProviderError,
		Codes: []string{"api_error", "server_error", "internal_error", "internal", "internal_server_error", "unavailable", "service_unavailable"},
		Any:   []string{"internalservererror", "internal server error", "server had an error", "bad gateway", "service unavailable"},
	},

	// --- the network (only when no status, or a 5xx) ---------------------
	{
		// getaddrinfo EAI_AGAIN: the resolver failed, the name may exist.
		Name: "dns_temporary", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{"temporary failure in name resolution", "eai_again", "server misbehaving"},
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
		},
	},
	{
		Name: "dns_not_found", Class: NetworkPermanent, Scope: ScopeTransport,
		Any: []string{
			"no such host", "name or service not known", "nodename nor servname provided",
			"getaddrinfo enotfound", "'enotfound'", "\"enotfound\"", "name does not resolve", "could not resolve host", "nameresolutionerror",
			"unsupported protocol scheme", "err_invalid_url", "invalid url",
		},
	},
	{
		Name: "transport_timeout", Class: Timeout, Scope: ScopeTransport,
		Any: []string{
			"deadline exceeded", "deadline_exceeded", "i/o timeout", "tls handshake timeout",
			"timeout exceeded", "timed out", "timedout", "etimedout", "und_err_connect_timeout",
			"und_err_headers_timeout", "und_err_body_timeout", "connecttimeout", "readtimeout",
			"writetimeout", "pooltimeout", "apitimeouterror", "timeouterror", "gateway timeout",
			"gateway time-out", "err_socket_connection_timeout", "awaiting headers",
		},
	},
	{
		Name: "transport_transient", Class: NetworkTransient, Scope: ScopeTransport,
		Any: []string{
			"connection reset", "econnreset", "broken pipe", "epipe", "connection refused",
			"econnrefused", "connection aborted", "econnaborted", "unexpected eof", ": eof",
			"server sent goaway", "goaway", "fetch failed", "und_err_socket", "other side closed",
			"socket hang up", "network is unreachable", "enetunreach", "no route to host",
			"ehostunreach", "host is unreachable", "server disconnected", "remoteprotocolerror",
			"remote end closed connection", "connection closed", "connection error",
			"apiconnectionerror", "connecterror", "connectionerror", "clientconnectorerror",
			"cannot connect to host", "failed to establish a new connection",
			"max retries exceeded with url", "incomplete chunked read", "peer closed connection",
			"stream error", "protocol_error", "internal_error; received from peer",
			"upstream connect error", "network error", "networkerror", "err_network",
		},
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
}
