// Package faqeval measures how well the FAQ answers the questions people
// ask: it reads an evaluation set (testdata/eval.yaml of the faq package:
// questions with the entry that answers each, or none), matches every
// question, and counts per split and language the in-scope recall, the
// wrong answers to in-scope questions and the answers given to
// out-of-scope ones. It also builds a large knowledge base from a small one
// (Synthetic) and times Match on it. make faq-eval prints both
// (cmd/faqeval).
//
// Invariants: no Temporal, no network, no randomness; the same files give
// the same counts. Only the tune split's individual errors are ever
// printed: the held-out split is reported as totals, so that no tuning
// looks at it.
package faqeval
