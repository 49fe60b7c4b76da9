// Package testkit holds, in its subpackages, the rigs that integration
// tests, benchmarks and `make cluster` run against: dev servers with the
// LLM search attributes (testenv), the stack one test runs against
// (rig: llmsim, a worker, the front door), throwaway PostgreSQL servers
// (pgserver), the one-machine production cluster (cluster), the
// golden-history recorder (histories), the failover tests of a two-endpoint
// ladder with one endpoint lost or busy (failover), and the tests against real parts
// (uicheck: the Web UI in Chromium; deploytest: worker versioning;
// realllm: a real LLM server). They import the product; nothing in the
// product imports them (internal/ holds the leaf helpers it does import).
package testkit
