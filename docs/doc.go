// Package docs holds durable-llm's documentation, one page per task, and the
// tests that keep it honest: every relative link and #anchor in README.md and
// docs/*.md resolves, README stays a short page that reaches every doc, and
// README's quick-start blocks are the code and commands the tests run.
//
// The package has no code of its own; its tests run with every go test ./...
package docs
