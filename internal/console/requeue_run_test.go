package console

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRequeueButtonNamesItsRun (#23 item 9): the requeue buttons carry the
// run of the dead letter the page showed; a click whose run is no longer
// the dead letter's (requeued and dead-lettered again since) is 409 and
// requeues nothing; the run shown requeues it.
func TestRequeueButtonNamesItsRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedDeadLetters(t, 2) // run 1 each
	bearer := "Authorization: Bearer " + testToken

	r := call(t, "GET", f.url+"/ui/deadletter/dl-1", nil, bearer)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `name="run" value="1"`)
	r = call(t, "GET", f.url+"/ui/deadletters", nil, bearer)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `name="run" value="1"`)

	r = call(t, "POST", f.url+"/ui/deadletter/dl-1/requeue", url.Values{"run": {"0"}}, bearer)
	require.Equal(t, http.StatusConflict, r.status, r.body)
	require.Contains(t, r.body, "run 1, not run 0")
	_, err := f.dlq.Get(context.Background(), "dl-1")
	require.NoError(t, err, "not requeued")

	r = call(t, "POST", f.url+"/ui/deadletter/dl-1/requeue", url.Values{"run": {"x"}}, bearer)
	require.Equal(t, http.StatusBadRequest, r.status, r.body)

	r = call(t, "POST", f.url+"/ui/deadletter/dl-1/requeue", url.Values{"run": {"1"}}, bearer)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	v, err := f.store.Get(context.Background(), "dl-1")
	require.NoError(t, err)
	require.Equal(t, 2, v.Run)
}
