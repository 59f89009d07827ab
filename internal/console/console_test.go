package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/charts"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type resp struct {
	status int
	header http.Header
	body   string
}

// call sends a request; form (when not nil) is a url-encoded POST body;
// hdr are extra headers ("Name: value").
func call(t *testing.T, method, u string, form url.Values, hdr ...string) resp {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return resp{status: res.StatusCode, header: res.Header, body: string(b)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	require.NotNil(t, m, "the page has a CSRF field")
	return m[1]
}

// login posts the token to the login form and returns the session cookie header.
func login(t *testing.T, f *fixture) string {
	t.Helper()
	r := call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}, "next": {"/ui/breakers"}}, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	require.Equal(t, "/ui/breakers", r.header.Get("Location"))
	ck := r.header.Get("Set-Cookie")
	require.Contains(t, ck, SessionCookie+"=")
	return "Cookie: " + strings.SplitN(ck, ";", 2)[0]
}

func TestLoginAndSessionCookie(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)

	r := call(t, "GET", f.url+"/ui/deadletters?agent=llm", nil)
	require.Equal(t, http.StatusSeeOther, r.status)
	require.Equal(t, "/ui/login?next=%2Fui%2Fdeadletters%3Fagent%3Dllm", r.header.Get("Location"))

	r = call(t, "GET", f.url+"/ui/login", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, `type="password"`)
	require.NotContains(t, r.body, testToken)

	// A wrong token, a cross-site login and a login without Origin fail.
	r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {"nope"}}, "Origin: "+f.url)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Empty(t, r.header.Get("Set-Cookie"))
	r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}}, "Origin: http://evil.example")
	require.Equal(t, http.StatusForbidden, r.status)
	require.Empty(t, r.header.Get("Set-Cookie"))
	r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}}, "Origin: null")
	require.Equal(t, http.StatusForbidden, r.status)
	r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}}, "Referer: http://evil.example/x")
	require.Equal(t, http.StatusForbidden, r.status)
	r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}})
	require.Equal(t, http.StatusSeeOther, r.status, "a script (no Origin, no Referer) may log in")

	r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}, "next": {"//evil.example/x"}}, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status)
	require.Equal(t, "/ui/", r.header.Get("Location"), "next stays inside the console")
	ck := r.header.Get("Set-Cookie")
	require.Contains(t, ck, "HttpOnly")
	require.Contains(t, ck, "SameSite=Strict")
	require.Contains(t, ck, "Path=/ui/")
	require.NotContains(t, ck, "Secure", "plain HTTP: not Secure")
	require.NotContains(t, ck, testToken)
	cookie := "Cookie: " + strings.SplitN(ck, ";", 2)[0]

	r = call(t, "GET", f.url+"/ui/", nil, cookie)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, "<h1>Overview</h1>")
	for _, name := range []string{">Overview<", ">Dead letters<", ">Breakers<", ">Restarts<", ">Agents<", `type="search"`} {
		require.Contains(t, r.body, name)
	}
	require.NotContains(t, r.body, testToken, "no secret in pages")

	// A tampered cookie is no session.
	bad := strings.Replace(cookie, ".", ".A", 1)
	r = call(t, "GET", f.url+"/ui/", nil, bad)
	require.Equal(t, http.StatusSeeOther, r.status)

	// Secure behind TLS (a proxy saying so).
	r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}}, "Origin: "+f.url, "X-Forwarded-Proto: https")
	require.Contains(t, r.header.Get("Set-Cookie"), "; Secure")

	// Log out: POST with the CSRF token clears the cookie.
	page := call(t, "GET", f.url+"/ui/", nil, cookie)
	r = call(t, "POST", f.url+"/ui/logout", url.Values{"csrf": {csrfOf(t, page.body)}}, cookie, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status)
	require.Contains(t, r.header.Get("Set-Cookie"), "Max-Age=0")
}

// TestLoginLimit: wrong tokens typed into the form, wrong bearer headers
// on the console and on the API draw on one allowance per client address;
// past it the form and every bearer request answer 429 with Retry-After,
// the right token included; a session cookie still works (it proves an
// earlier login, it is not a guess).
func TestLoginLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	cookie := login(t, f)
	for i := range httpx.DefaultMaxFailures {
		var r resp
		switch i % 3 {
		case 0:
			r = call(t, "POST", f.url+"/ui/login", url.Values{"token": {"guess"}}, "Origin: "+f.url)
		case 1:
			r = call(t, "GET", f.url+"/ui/deadletters", nil, "Authorization: Bearer guess")
		case 2:
			r = call(t, "GET", f.url+"/api/v1/agents", nil, "Authorization: Bearer guess")
		}
		require.Equal(t, http.StatusUnauthorized, r.status, "failure %d: %s", i, r.body)
	}
	for _, r := range []resp{
		call(t, "POST", f.url+"/ui/login", url.Values{"token": {testToken}}, "Origin: "+f.url),
		call(t, "GET", f.url+"/ui/", nil, "Authorization: Bearer "+testToken),
		call(t, "POST", f.url+"/ui/breakers/reset", url.Values{"key": {"llm.example"}}, "Authorization: Bearer "+testToken),
		call(t, "GET", f.url+"/api/v1/agents", nil, "Authorization: Bearer "+testToken),
	} {
		require.Equal(t, http.StatusTooManyRequests, r.status, "even the right token, once locked out: %s", r.body)
		require.Empty(t, r.header.Get("Set-Cookie"))
		secs, err := strconv.Atoi(r.header.Get("Retry-After"))
		require.NoError(t, err)
		require.Positive(t, secs)
	}
	r := call(t, "GET", f.url+"/ui/", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, "a session from before still works")
}

func TestSessionExpires(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &Console{opts: Options{Token: "t", SessionTTL: time.Hour, Now: func() time.Time { return now }}, key: keyFor("t")}
	_, v := c.newSession()
	_, ok := c.parseSession(v)
	require.True(t, ok)
	now = now.Add(time.Hour)
	_, ok = c.parseSession(v)
	require.False(t, ok, "expired")
	other := &Console{opts: c.opts, key: keyFor("another token")}
	now = now.Add(-30 * time.Minute)
	_, ok = other.parseSession(v)
	require.False(t, ok, "a session of another token")
}

func TestBearerAndHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedDeadLetters(t, 3)

	r := call(t, "GET", f.url+"/ui/deadletters", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, `data-id="dl-3"`)
	require.Contains(t, r.header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", r.header.Get("X-Frame-Options"))
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	require.NotEmpty(t, r.header.Get("Referrer-Policy"))
	require.NotRegexp(t, `<script>|<script [^>]*>[^<]`, r.body, "no inline script")
	require.NotContains(t, r.body, "style=", "no inline style")

	r = call(t, "GET", f.url+"/ui/deadletters", nil, "Authorization: Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, r.status)

	// A script with the bearer header needs no CSRF token.
	r = call(t, "POST", f.url+"/ui/deadletter/dl-2/requeue", url.Values{}, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	_, err := f.dlq.Get(context.Background(), "dl-2")
	require.ErrorIs(t, err, deadletter.ErrNotFound)

	// Assets come from the binary.
	r = call(t, "GET", f.url+"/ui/static/app.js", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.header.Get("Content-Type"), "javascript")
	r = call(t, "GET", f.url+"/ui/static/app.css", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.header.Get("Content-Type"), "text/css")

	r = call(t, "GET", f.url+"/ui/static/", nil)
	require.Equal(t, http.StatusNotFound, r.status, "no listing")
	r = call(t, "GET", f.url+"/ui/nothing-here", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusNotFound, r.status)
	r = call(t, "GET", f.url+"/ui/tasks/no-such-task", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Contains(t, r.body, "no-such-task")
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	cookie := login(t, f)
	page := call(t, "GET", f.url+"/ui/breakers", nil, cookie)
	require.Equal(t, http.StatusOK, page.status)
	token := csrfOf(t, page.body)
	origin := "Origin: " + f.url
	trip := func(csrf string, hdr ...string) int {
		form := url.Values{"key": {"llm.example"}, "for": {"1m"}}
		if csrf != "" {
			form.Set("csrf", csrf)
		}
		return call(t, "POST", f.url+"/ui/breakers/trip", form, append([]string{cookie}, hdr...)...).status
	}
	require.Equal(t, http.StatusForbidden, trip("", origin), "no CSRF token")
	require.Equal(t, http.StatusForbidden, trip(token[:len(token)-2]+"xx", origin), "wrong CSRF token")
	require.Equal(t, http.StatusForbidden, trip(token, "Origin: null"), "Origin null")
	require.Equal(t, http.StatusForbidden, trip(token, "Referer: http://evil.example/"), "cross-site Referer")
	require.Equal(t, http.StatusForbidden, trip(token, "Origin: http://evil.example"), "cross-site")
	// Another session's token does not fit this session.
	other := login(t, f)
	otherToken := csrfOf(t, call(t, "GET", f.url+"/ui/breakers", nil, other).body)
	require.NotEqual(t, token, otherToken)
	require.Equal(t, http.StatusForbidden, trip(otherToken, origin), "another session's token")
	snap, err := breaker.New(f.rdb).Get(context.Background(), "llm.example")
	require.NoError(t, err)
	require.Equal(t, breaker.StateClosed, snap.State, "nothing refused changed anything")

	require.Equal(t, http.StatusSeeOther, trip(token, origin))
	snap, err = breaker.New(f.rdb).Get(context.Background(), "llm.example")
	require.NoError(t, err)
	require.Equal(t, breaker.StateOpen, snap.State)
	require.Equal(t, http.StatusSeeOther, trip(token, "Referer: "+f.url+"/ui/breakers"), "Referer when no Origin")
	require.Equal(t, http.StatusSeeOther, trip(token), "a script: neither header, the CSRF token is enough")

	r := call(t, "POST", f.url+"/ui/breakers/trip", url.Values{"csrf": {token}, "key": {"llm.example"}, "for": {"soon"}}, cookie, origin)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, r.body, "not a positive duration")
	r = call(t, "POST", f.url+"/ui/breakers/reset", url.Values{"csrf": {token}, "key": {"llm.example"}}, cookie, origin)
	require.Equal(t, http.StatusSeeOther, r.status)
	snap, err = breaker.New(f.rdb).Get(context.Background(), "llm.example")
	require.NoError(t, err)
	require.Equal(t, breaker.StateClosed, snap.State)
}

func TestOpenModeStillNeedsCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.seedDeadLetters(t, 2)
	r := call(t, "GET", f.url+"/ui/deadletters", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, r.body, "Log out")
	ck := r.header.Get("Set-Cookie")
	require.Contains(t, ck, SessionCookie+"=")
	cookie := "Cookie: " + strings.SplitN(ck, ";", 2)[0]
	origin := "Origin: " + f.url
	r = call(t, "POST", f.url+"/ui/deadletter/dl-1/delete", url.Values{}, cookie, origin)
	require.Equal(t, http.StatusForbidden, r.status, "no CSRF token")
	r = call(t, "POST", f.url+"/ui/deadletter/dl-1/delete", url.Values{"csrf": {csrfOf(t, call(t, "GET", f.url+"/ui/deadletters", nil, cookie).body)}}, cookie, origin)
	require.Equal(t, http.StatusSeeOther, r.status)
	require.Contains(t, r.header.Get("Location"), "done=deleted")
	_, err := f.dlq.Get(context.Background(), "dl-1")
	require.ErrorIs(t, err, deadletter.ErrNotFound)
	r = call(t, "GET", f.url+"/ui/login", nil)
	require.Equal(t, http.StatusSeeOther, r.status, "no login without a token")
}

func TestBulkAndExport(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedDeadLetters(t, 9) // llm: dl-1,3,5,7,9; tool: dl-2,4,6,8
	bearer := "Authorization: Bearer " + testToken

	r := call(t, "GET", f.url+"/ui/deadletters/export?agent=llm", nil, bearer)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/x-ndjson", r.header.Get("Content-Type"))
	require.Contains(t, r.header.Get("Content-Disposition"), "attachment")
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(r.body))
	for sc.Scan() {
		require.Contains(t, sc.Text(), `"agent":"llm"`)
		lines++
	}
	require.Equal(t, 5, lines)

	r = call(t, "GET", f.url+"/ui/deadletters/bulk?action=delete&agent=tool", nil, bearer)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, "Delete 4 dead letters?")
	r = call(t, "POST", f.url+"/ui/deadletters/bulk", url.Values{"action": {"delete"}, "agent": {"tool"}}, bearer)
	require.Equal(t, http.StatusSeeOther, r.status)
	require.Equal(t, "/ui/deadletters?agent=tool&done=deleted-n", r.header.Get("Location"), "only the kind: counts come from server state")
	r = call(t, "POST", f.url+"/ui/deadletters/bulk", url.Values{"action": {"requeue"}, "class": {"rate_limited"}}, bearer)
	require.Equal(t, http.StatusSeeOther, r.status)
	require.Contains(t, r.header.Get("Location"), "done=requeued-n")
	require.NotContains(t, r.header.Get("Location"), "n=5")
	n, err := f.dlq.Count(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	r = call(t, "GET", f.url+"/ui/deadletters?class=bogus", nil, bearer)
	require.Equal(t, http.StatusBadRequest, r.status)
}

func TestTaskPageAndCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedTask(t, "job/7 ü")
	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/tasks?id="+url.QueryEscape(" job/7 ü "), nil, cookie)
	require.Equal(t, http.StatusSeeOther, r.status)
	loc := r.header.Get("Location")
	require.Equal(t, "/ui/tasks/job%2F7%20%C3%BC", loc)
	r = call(t, "GET", f.url+loc, nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, "context deadline exceeded after 30s")
	require.Contains(t, r.body, `class="timeline"`)
	require.Contains(t, r.body, "Cancel task")
	r = call(t, "POST", f.url+loc+"/cancel", url.Values{"csrf": {csrfOf(t, r.body)}}, cookie, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	select {
	case id := <-f.cancels.ids:
		require.Equal(t, "job/7 ü", id)
	case <-time.After(5 * time.Second):
		t.Fatal("Cancel was not called")
	}

	// A succeeded task shows its result and cannot be canceled.
	f.seedTask(t, "done-1")
	_, err := record.StoreOf(f.store).Apply(context.Background(), record.Delivery{ID: "done-1", Attempt: 2},
		record.Succeeded(record.Attempt{Attempt: 2, Agent: "llm"}, json.RawMessage(`{"answer":42}`)))
	require.NoError(t, err)
	r = call(t, "GET", f.url+"/ui/tasks/done-1", nil, cookie)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, "<h2>Result</h2>")
	require.Contains(t, r.body, "answer&#34;: 42")
	require.Contains(t, r.body, `st-succeeded`)
	require.NotContains(t, r.body, "Cancel task")
}

// TestSamplerStoresInRedis: a reading is stored as its minute's in
// Redis; attempts the workers counted join it; the charts draw both.
func TestSamplerStoresInRedis(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.seedTask(t, "t1")
	now := time.Date(2026, 1, 1, 12, 0, 20, 0, time.UTC)
	s := NewSampler(f.rdb, SamplerOptions{Window: 10 * time.Minute, Now: func() time.Time { return now }})
	ctx := context.Background()
	s.SampleNow(ctx)
	c := charts.NewCounter(f.rdb, charts.CounterOptions{Now: func() time.Time { return now.Add(time.Minute) }})
	c.Succeeded()
	c.Succeeded()
	c.Failed()
	require.NoError(t, c.Flush(ctx))
	now = now.Add(time.Minute)
	got, err := s.Samples(ctx)
	require.NoError(t, err)
	require.Equal(t, []Sample{
		{At: now.Add(-time.Minute).Truncate(time.Minute), Pending: 1, queues: true},
		{At: now.Truncate(time.Minute), Succeeded: 2, Failed: 1},
	}, got)
	ch := buildCharts(got, now, 10*time.Minute)
	require.Len(t, ch.Queues.Lines, 4)
	require.False(t, ch.Queues.Empty)
	require.Len(t, ch.Outcomes.Bars, 2)
	require.Equal(t, 2, ch.Outcomes.Legend[0].Last)
	for _, b := range ch.Outcomes.Bars {
		x, _ := strconv.ParseFloat(b.X, 64)
		w, _ := strconv.ParseFloat(b.W, 64)
		require.LessOrEqual(t, x+w, float64(ch.Outcomes.Right), "the current minute's bar is inside the plot")
	}
	now = now.Add(20 * time.Minute)
	got, err = s.Samples(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "minutes older than the window are not read")
}

// TestSamplerLifecycle: a started sampler stores readings until stopped;
// Stop is idempotent.
func TestSamplerLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.seedTask(t, "t1")
	s := NewSampler(f.rdb, SamplerOptions{Every: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	require.Eventually(t, func() bool {
		got, err := s.Samples(ctx)
		return err == nil && len(got) > 0 && got[len(got)-1].Pending == 1
	}, 10*time.Second, 10*time.Millisecond, "the sampler stored no reading")
	cancel()
	s.Stop() // returns once the loop has ended
	s.Stop()
}

// TestChartsSameOnEveryConsole: the Overview's charts come from Redis: two
// consoles (two `enqueuer serve`) draw the same charts, and a console
// started afresh (a restart: nothing in its memory) draws them too.
func TestChartsSameOnEveryConsole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedTask(t, "t1")
	now := time.Now().UTC()
	clock := func() time.Time { return now }
	log := slog.New(slog.DiscardHandler)
	sampler := func() *Sampler { return NewSampler(f.rdb, SamplerOptions{Now: clock, Logger: log}) }
	a, b := sampler(), sampler()
	a.SampleNow(context.Background()) // console A reads the queues; B never does
	c := charts.NewCounter(f.rdb, charts.CounterOptions{Now: clock})
	for range 7 {
		c.Succeeded()
	}
	c.Failed()
	require.NoError(t, c.Flush(context.Background()))
	urlA, urlB := f.replicaWith(t, testToken, log, a), f.replicaWith(t, testToken, log, b)
	bearer := "Authorization: Bearer " + testToken
	chartsOf := func(url string) string {
		t.Helper()
		r := call(t, "GET", url+"/ui/", nil, bearer)
		require.Equal(t, http.StatusOK, r.status)
		i, j := strings.Index(r.body, `<section class="charts">`), strings.Index(r.body, `id="chart-note"`)
		require.True(t, i >= 0 && j > i, "the Overview has its charts")
		return r.body[i:j]
	}
	got := chartsOf(urlA)
	require.Contains(t, got, `<polyline class="s-pending"`)
	require.Contains(t, got, "7 succeeded, 1 failed")
	require.Equal(t, got, chartsOf(urlB), "two consoles draw the same charts")
	restarted := f.replicaWith(t, testToken, log, sampler())
	require.Equal(t, got, chartsOf(restarted), "a console started afresh draws the same charts")
}

// TestDeadLettersPastTheEnd: an offset past the last dead letter (a shared
// link after the list shrank, or the page left after its last row was
// requeued) shows the last page, not an empty one numbered past the end.
func TestDeadLettersPastTheEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedDeadLetters(t, 120) // 3 pages of 50: the last holds dl-1 … dl-20
	bearer := "Authorization: Bearer " + testToken
	for _, off := range []string{"120", "150", "100000"} {
		r := call(t, "GET", f.url+"/ui/deadletters?offset="+off, nil, bearer)
		require.Equal(t, http.StatusOK, r.status)
		require.Contains(t, r.body, "101–120 of", "offset %s", off)
		require.Contains(t, r.body, "page 3 of 3", "offset %s", off)
		require.Contains(t, r.body, `data-id="dl-1"`, "offset %s", off)
	}
	r := call(t, "GET", f.url+"/ui/deadletters?agent=nobody&offset=50", nil, bearer)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, "No dead letters match this filter.")
}

// TestBulkActsOnTheConfirmedSet: a bulk action confirmed for N dead
// letters acts on those N, not on dead letters that arrived after the
// confirmation page was shown.
func TestBulkActsOnTheConfirmedSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedDeadLetters(t, 6) // llm: dl-1,3,5; tool: dl-2,4,6
	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/deadletters/bulk?action=delete&agent=tool", nil, cookie)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, "Delete 3 dead letters?")
	through := regexp.MustCompile(`name="through" value="(\d+)"`).FindStringSubmatch(r.body)
	require.NotNil(t, through, "the confirmation names the newest it counted")

	// A new dead letter of the same agent arrives meanwhile.
	now := time.Now().UTC()
	_, err := f.dlq.Put(context.Background(), &deadletter.Entry{ID: "late", Agent: "tool", ErrorClass: "invalid_request",
		Error: "bad", Reason: deadletter.ReasonAttemptsExhausted, Attempts: 1, DeadLetteredAt: now, EnqueuedAt: now, Queue: "default",
		History: []tasks.Event{{At: now, Event: tasks.EventDeadLettered, Attempt: 1}}})
	require.NoError(t, err)

	r = call(t, "POST", f.url+"/ui/deadletters/bulk", url.Values{"csrf": {csrfOf(t, r.body)}, "action": {"delete"},
		"agent": {"tool"}, "class": {""}, "through": {through[1]}}, cookie, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	r = call(t, "GET", f.url+r.header.Get("Location"), nil, cookie)
	require.Contains(t, r.body, "Deleted 3 dead letters.", "the flash, from the session's server-side state")
	_, err = f.dlq.Get(context.Background(), "late")
	require.NoError(t, err, "the dead letter that came after the confirmation is kept")
	_, total, err := f.dlq.List(context.Background(), deadletter.Filter{Agent: "tool"})
	require.NoError(t, err)
	require.Equal(t, int64(1), total)

	r = call(t, "POST", f.url+"/ui/deadletters/bulk", url.Values{"action": {"delete"}, "through": {"yesterday"}}, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusBadRequest, r.status)
}

// TestClassifiedByShown (#38): what decided a failure's class shows beside
// the class, on the task's page (its facts and its history) and on a dead
// letter's page.
func TestClassifiedByShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedTask(t, "cb-1")
	f.seedDeadLetters(t, 1)
	bearer := "Authorization: Bearer " + testToken
	r := call(t, "GET", f.url+"/ui/tasks/cb-1", nil, bearer)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<span class="meta" id="task-classified-by" title="what decided the class">by structure</span>`)
	require.Contains(t, r.body, `<span class="badge cls">timeout</span><span class="meta ev-by" title="what decided the class">by structure</span>`)
	r = call(t, "GET", f.url+"/ui/deadletter/dl-1", nil, bearer)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `id="dl-classified-by" title="what decided the class">by status</span>`)
	require.Contains(t, r.body, `<span class="meta ev-by" title="what decided the class">by status</span>`)
}

// TestLoginPageHasNoNav: before logging in, no page shows the nav bar or
// the search box (the login form, a refused form); once logged in, they
// are on every page.
func TestLoginPageHasNoNav(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	for _, r := range []resp{
		call(t, "GET", f.url+"/ui/login", nil),
		call(t, "POST", f.url+"/ui/login", url.Values{"token": {"nope"}}, "Origin: "+f.url),
		call(t, "POST", f.url+"/ui/breakers/reset", url.Values{"key": {"tool"}}),
	} {
		require.NotContains(t, r.body, `<nav aria-label="Main">`, "status %d", r.status)
		require.NotContains(t, r.body, `role="search"`, "status %d", r.status)
	}
	r := call(t, "GET", f.url+"/ui/breakers", nil, login(t, f))
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.body, `<nav aria-label="Main">`)
	require.Contains(t, r.body, `role="search"`)
}
