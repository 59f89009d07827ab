package usage

import "encoding/json"

// Of returns what a call used: the "usage" field of an agent's
// ActionResponse (used) when set (Object: a usage object of any provider's
// shape, or a bare number of tokens), else the usage of the result data
// read as a provider's reply (Parse: OpenAI, Anthropic, Gemini, Bedrock
// Converse, an assembled stream), and the system its shape names
// (SystemOpenAI, …; "" when unknown). Zero when none is found.
func Of(data, used json.RawMessage) (Usage, string) {
	if u, system := Object(used); !u.IsZero() {
		return u, system
	}
	return Parse(data)
}
