// Package livestream carries a streamed attempt's text from the worker that
// runs it to the processes that follow the call (front doors, llmclient),
// outside the call's workflow history.
//
// The answer must be durable; each token need not be. The call activity
// checkpoints the text so far in its heartbeat details, a write of the
// activity's state that adds no history event, and hands a piece to its
// followers only once a checkpoint covering it is confirmed. So a follower
// never holds text that the workflow would not continue after a lost
// worker, and the workflow's history holds one "live" event per attempt
// (where to follow it) instead of a signal and a poll per token batch.
//
// A worker serves its attempts at GET <base>/live/{id}?from=N: the pieces
// from index N on, one JSON object per line ({"i":N,"text":…} or
// {"i":N,"tool_calls":[…]}), then {"end":true,"pieces":M} when the attempt
// ends. The id is a random capability (128 bits) that the activity puts in
// its live event; an unknown id is a 404.
package livestream
