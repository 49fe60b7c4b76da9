// Package failover holds dev-server integration tests of what callers get
// when one of a ladder's two endpoints stops answering: loses every
// request, refuses every request as busy, or both refuse for a while and
// then recover. Each case starts two llmsim servers, a worker whose policy
// file puts the model primary on one and backup on the other, and calls
// at a steady pace; it counts the calls a model answered and the requests
// each endpoint received. The tests need the Temporal dev server and are
// skipped under -short.
package failover
