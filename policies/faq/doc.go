// Package faq is the first business fallback (docs/how-it-works.md, step
// 7): a FAQ file parsed and indexed once (ParseFAQ, LoadFAQ, DefaultFAQ for
// the embedded example), and Match, which returns the best entry for a
// question, in English or Chinese, when its score clears a threshold. The
// words it reads as one (synonyms, variant characters, couriers' names) and
// the Chinese homophones it corrects are in lexicon.go.
//
// Invariants:
//   - No Temporal import; it imports only the keyword package (and YAML).
//   - A FAQ is immutable once built and safe for concurrent use; matching
//     is fast and allocation-light because it runs on the fallback path,
//     often while the upstream is overloaded.
//   - No clock, no randomness, no logging; files are read only by LoadFAQ.
package faq
