package activities

import "github.com/durable-llm/durable-llm/policies/faq"

// SetFAQ replaces the FAQ a's fallback answers from (nil: none; a rule's
// card or the placeholder answers). It is a function, not a method, so
// that registering a as activities does not take it for one. Call it
// before a worker runs a's activities: llmworker turns the embedded
// example FAQ on only at Start, once every model's endpoint has said it
// is the simulator.
func SetFAQ(a *Activities, f *faq.FAQ) { a.faq = f }
