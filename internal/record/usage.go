package record

import (
	"strconv"
	"strings"

	"github.com/agentq/agentq/internal/amount"
)

// The task's usage sum is one record field (FieldUsage) rather than one
// per number: the checked write sets it with the HSET it makes anyway, so
// an attempt that reports usage costs Redis one more field of that HSET
// and one more argument; only a task's second usage makes the script add
// (and it adds in Lua, the numbers being integers).

// The sum keeps the cost in nano-dollars (amount.NanoUSD), an integer,
// so that the script adds it exactly (the attempts' own costs, on their
// events, keep every digit).

// FormatUsageSum is u as FieldUsage holds it: "in,out,cached,total", and
// ",nanos" (the cost in nano-dollars) when u has a cost; "" for no usage
// at all (no tokens, no cost). Every number is within [0, amount.MaxSum]
// (what the script's saturating sum needs), whatever u says.
func FormatUsageSum(u amount.Usage) string {
	if u.IsZero() && u.CostUSD == 0 {
		return ""
	}
	b := make([]byte, 0, 48)
	b = strconv.AppendInt(b, sumPart(u.InputTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, sumPart(u.OutputTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, sumPart(u.CachedTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, sumPart(u.TotalTokens), 10)
	if u.CostUSD != 0 {
		b = append(b, ',')
		b = strconv.AppendInt(b, amount.NanoUSD(u.CostUSD), 10)
	}
	return string(b)
}

// sumPart is n within [0, amount.MaxSum].
func sumPart(n int64) int64 { return min(max(n, 0), amount.MaxSum) }

// ParseUsageSum reads a FieldUsage value: nil for none ("", or no
// tokens and no cost). A sum with a cost is Priced.
func ParseUsageSum(s string) *amount.Usage {
	if s == "" {
		return nil
	}
	var n [5]int64
	parts := strings.SplitN(s, ",", 5)
	for i, p := range parts {
		n[i], _ = strconv.ParseInt(p, 10, 64)
		n[i] = sumPart(n[i])
	}
	u := amount.Usage{InputTokens: n[0], OutputTokens: n[1], CachedTokens: n[2], TotalTokens: n[3]}
	if len(parts) == 5 {
		u.CostUSD, u.Priced = float64(n[4])/amount.NanosPerUSD, true
	}
	if u.IsZero() && !u.Priced {
		return nil
	}
	return &u
}
