// Package faq is the first business fallback (docs/how-it-works.md, step
// 7): a FAQ file parsed and indexed once (ParseFAQ, LoadFAQ, DefaultFAQ for
// the embedded example), and Match, which returns the best entry for a
// question, in English or Chinese, when its score clears a threshold. The
// words it reads as one (synonyms, variant characters, couriers' names) and
// the Chinese homophones it corrects are in lexicon.go.
//
// The file is read in parse.go, indexed in index.go (TF-IDF postings per
// feature), and a question is scored in match.go; text.go cuts text into
// features, typo.go corrects English typos.
//
// Invariants:
//   - No Temporal import; it imports only the keyword package (and YAML).
//   - A FAQ is immutable once built and safe for concurrent use; matching
//     is fast and allocation-light because it runs on the fallback path,
//     often while the upstream is overloaded: the index is built once at
//     load and a match only walks the postings of the question's features
//     (about 25 µs and 42 small allocations for a one-sentence question
//     against the example FAQ, BenchmarkFAQMatch; about 55–80 µs against
//     500 entries, faqeval.BenchmarkMatch500, make faq-eval).
//   - No clock, no randomness, no logging; files are read only by LoadFAQ.
//
// # Scoring
//
// Match's score is in [0, 1]:
//
//	score = L · min(1, S + K · W)
//
// S compares the question with each of the entry's documents (every
// paraphrase alone, and the entry as a whole: all its paraphrases and
// keywords) and keeps the best:
//
//	S = max(max over docs of cos(q, d) · √coverage(q, d), W^1.5)
//	W = coverage(q, whole entry)
//
// where q and d are TF-IDF vectors and coverage is the share of the
// question's squared weight on features that d also has. The cosine alone
// lets a one-word paraphrase ("When are you open?") match any question that
// uses the word ("how do I open a bank account"); the coverage factor asks
// that the document explain most of what was asked. An identical paraphrase
// gives S = 1. The features are:
//   - English and other space-separated words, lower-cased, stop words
//     ("how", "do", "i", "my" …) dropped, lightly stemmed ("refunds",
//     "refunded" → "refund"), plus their character trigrams;
//   - Chinese (and Japanese, Korean) text: character bigrams and single
//     characters, after cutting out function words (的, 了, 吗, 怎么, 请问 …);
//     mixed text yields both kinds.
//
// Words and phrases that mean the same to a shop's customers are read as
// one word on both sides (faqSynonyms: "parcel", "shipment" → "package",
// "paid" → "pay", "shipped" → "delivery", "Germany" → "country";
// faqPhrases: "sign in" → "login", "hasn't arrived" → "missing", "how
// soon" → "how long"; faqCJKSynonyms: 帐号 → 账号, 顺丰 → 快递). An English word of five
// letters or more that the FAQ never uses is read as the FAQ's word one
// edit away, if any ("refnud" → "refund", "cancle" → "cancel"; a word of
// four only as one with a letter more, "ordr" → "order"); a Chinese
// character that makes a pair the FAQ never uses is read as its homophone
// when that makes a pair the FAQ uses (包果 → 包裹, 退宽 → 退款). A
// character alone between function words is a word and weighs like a
// bigram; a stretch of k bigrams the FAQ never uses (a product name) weighs
// k^0.75 bigrams, not k.
//
// The IDF is computed over the entries, so words every entry uses weigh
// little, and words the FAQ never uses ("France", "天气", "router") weigh
// most (1 + 1.3·ln(N+1)): they lower both the cosine and the coverage of a
// question that shares a word with an entry but asks something else.
//
// K is the keyword bonus: 0.2 for the first of the entry's keywords found in
// the question (matched like business-rule keywords), 0.1 for each further
// one, at most 0.3; it counts in proportion to W, so a keyword in a question
// the entry otherwise does not explain ("tax refund from the IRS") adds
// little. A keyword alone does not reach the default threshold.
//
// L is 0.8 when the entry's lang names a language of the other script than
// most of the question (an English entry for "password忘了怎么办"), else 1:
// a question gets the answer in its own language when the FAQ has one.
//
// Ties go to the entry first in the file, except that among entries that
// reach 1 the one with the closer paraphrase wins. The cost is one pass over the
// question, over the postings of its features and over the keywords,
// independent of the length of the answers.
package faq
