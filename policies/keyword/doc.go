// Package keyword is the text matching shared by the business rules and the
// FAQ's keyword bonus: Fold normalises text and keywords (lower case,
// full-width ASCII to ASCII, curly apostrophes, white space), and In finds a
// folded keyword in folded text (at a word start for ASCII keywords, as a
// substring for others, such as Chinese).
//
// Invariants: it imports nothing of the module and nothing outside the
// standard library; pure functions, no state, no Temporal, no logging.
package keyword
