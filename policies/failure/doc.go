// Package failure names what can go wrong with one upstream attempt: the
// failure Class (docs/how-it-works.md "Failure classes") and the facts about a class that
// every other package needs, such as whether it counts against a model's
// breaker.
//
// It is the root of the policies packages and imports nothing of the module.
//
// Invariants:
//   - A class's string value appears in history (the ApplicationError type
//     of a failed attempt), in search attributes, in the policy file and in
//     metrics: once released it never changes, and AllClasses lists every
//     class in the order of docs/how-it-works.md "Failure classes".
//   - No Temporal import, no state, no logging.
package failure
