package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SecretPrefix starts a Standard Webhooks secret: whsec_ and the base64 of
// the key.
const SecretPrefix = "whsec_"

// ErrSecret is wrapped by ParseSecret's errors. They never hold the secret.
var ErrSecret = errors.New("invalid webhook secret")

// ParseSecret decodes a Standard Webhooks secret ("whsec_" and the
// standard base64 of 24 to 64 bytes) into the HMAC key.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: want %s<base64>", ErrSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%w: the part after %s is not standard base64", ErrSecret, SecretPrefix)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("%w: the key is %d bytes; want 24 to 64", ErrSecret, len(key))
	}
	return key, nil
}

// Sign is the webhook-signature header of a message: "v1," and the
// standard base64 of HMAC-SHA256(key, id + "." + timestamp + "." + body),
// timestamp in Unix seconds.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
