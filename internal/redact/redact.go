// Package redact strips secrets from URLs and errors before they are logged
// or stored: a URL's userinfo (user:password@), its query string (API keys
// such as Gemini's ?key=…) and its fragment.
//
// Use URL for a URL that appears in a log line or an error text, Host when the
// host alone is enough (a webhook whose path is the secret, as Slack's are),
// and Error on an error from an http.Client, whose *url.Error text carries
// the request URL.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Unparseable replaces a URL that cannot be parsed: its text may hold a
// secret, so none of it is kept.
const Unparseable = "[unparseable URL]"

// URL returns raw as scheme://host/path: without userinfo, query string and
// fragment. A query string is shown as "?[redacted]" so a reader sees there
// was one. An unparseable URL gives Unparseable.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Unparseable
	}
	return clean(u)
}

// Host returns the host (with its port, if any) of raw, or Unparseable.
// For a URL whose path is itself a secret (a Slack webhook).
func Host(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Unparseable
	}
	return u.Host
}

// Error rewrites, in place, the URL of every *url.Error in err's chain with
// URL, and returns err (the chain is intact, so errors.Is/As still work).
// An http.Client error prints `Post "https://h/p?key=SECRET": …`; after
// Error it prints `Post "https://h/p?[redacted]": …`.
func Error(err error) error {
	for e := err; e != nil; {
		var ue *url.Error
		if !errors.As(e, &ue) {
			break
		}
		ue.URL = URL(ue.URL)
		e = ue.Err
	}
	return err
}

func clean(u *url.URL) string {
	hadQuery := u.RawQuery != "" || u.ForceQuery
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.Opaque != "" {
		// mailto:x or scheme:opaque — nothing structured to keep but the scheme.
		c = url.URL{Scheme: u.Scheme, Opaque: "[redacted]"}
	}
	s := c.String()
	if hadQuery {
		s += "?[redacted]"
	}
	return strings.TrimSpace(s)
}
