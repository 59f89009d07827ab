package resilience

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSharedVocabularies: curl's error numbers, NSURLErrorDomain codes,
// reason phrases and the words of identifiers decide as structure (or as
// the status they say), without the model.
func TestSharedVocabularies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want Class
		by   Evidence
	}{
		{"curl_28", `cURL error 28: Operation timed out after 30001 milliseconds with 0 bytes received`, Timeout, ByText},
		{"curl_6", "curl: (6) Could not resolve host: api.example.invalid", NetworkPermanent, ByText},
		{"curl_60_number_only", `cURL error 60: see https://curl.haxx.se/libcurl/c/libcurl-errors.html`, NetworkPermanent, ByStructure},
		{"curl_unknown_number", `cURL error 99: see https://curl.haxx.se/libcurl/c/libcurl-errors.html`, ProviderError, ByDefault},
		{"nsurl_timeout", `Error Domain=NSURLErrorDomain Code=-1001 "请求超时。"`, Timeout, ByStructure},
		{"nsurl_cancelled", `Error Domain=NSURLErrorDomain Code=-999 "cancelled"`, Canceled, ByStructure},
		{"nsurl_cannot_find_host", `Error Domain=NSURLErrorDomain Code=-1003 "找不到主机"`, NetworkPermanent, ByStructure},
		{"identifier_dimension", "InvalidDimensionException: Embedding dimension 1536 does not match collection dimensionality 384", InvalidRequest, ByStructure},
		{"identifier_code_in_parentheses", "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the PutObject operation", RateLimited, ByStructure},
		{"identifier_upper_snake", "ERROR: (gcloud.compute.instances.create) Could not fetch resource:\n---\ncode: ZONE_RESOURCE_POOL_EXHAUSTED", RateLimited, ByStructure},
		{"reason_phrase_alone", `{"err_code":"Unprocessable Entity","err_msg":"x"}`, InvalidRequest, ByStatus},
		{"status_in_parentheses", "qdrant_client.http.exceptions.UnexpectedResponse: Unexpected Response: 404 (Not Found)", InvalidRequest, ByStatus},
		{"reason_phrase_in_prose_is_not_a_status", "the bad request handler crashed", ProviderError, ByDefault},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := rulesOnly.Classify(&Failure{Text: tc.text})
			require.Equal(t, tc.want, v.Class)
			require.Equal(t, tc.by, v.By)
		})
	}
}

// TestModelFileErrors: a damaged model file is an error naming its line.
func TestModelFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, want string }{
		{"classes\tprovider_error\nbias\t0\nw:x\t1 2\n", "line 3: 2 weights for 1 classes"},
		{"classes\tno_such_class\n", "line 1"},
		{"classes\tprovider_error\nbias\tx\n", "line 2"},
		{"classes\tprovider_error\n", "no bias line"},
		{"nonsense\n", "line 1: no tab"},
	} {
		_, err := parseModel(tc.file)
		require.ErrorContains(t, err, tc.want)
	}
	m, err := parseModel(modelFile)
	require.NoError(t, err)
	require.Len(t, m.classes, len(Classes()))
}

// TestModelVerdicts: what structure and the tables leave open, the model
// decides (weak below strongModelProb); a no-retry decision it is not sure
// of falls to the default, which retries.
func TestModelVerdicts(t *testing.T) {
	t.Parallel()
	classes := Classes()
	row := func(c Class, w float32) []float32 {
		r := make([]float32, len(classes))
		for i, x := range classes {
			if x == c {
				r[i] = w
			}
		}
		return r
	}
	m := &textModel{classes: classes, bias: make([]float32, len(classes)), weights: map[string][]float32{
		"w:frobnicated": row(RateLimited, 40),
		"w:wobbled":     row(RateLimited, 4),
		"w:borked":      row(InvalidRequest, 3),
		"w:the":         row(ProviderError, 0),
		"w:job":         row(ProviderError, 0),
		"w:was":         row(ProviderError, 0),
	}}
	m.setRules()
	c := Classifier{Now: testClassifier.Now, model: m}
	for _, tc := range []struct {
		text string
		want Class
		by   Evidence
		weak bool
	}{
		{"the job was frobnicated", RateLimited, ByModel, false},
		{"the job was wobbled", RateLimited, ByModel, true},
		{"the job was borked", ProviderError, ByDefault, true},
		{"frobnicated", ProviderError, ByDefault, true}, // too few words the model knows
		{"nothing known", ProviderError, ByDefault, true},
	} {
		v := c.Classify(&Failure{Text: tc.text})
		require.Equal(t, tc.want, v.Class, tc.text)
		require.Equal(t, tc.by, v.By, tc.text)
		require.Equal(t, tc.weak, v.Weak, tc.text)
	}
}
