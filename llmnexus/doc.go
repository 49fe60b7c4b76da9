// Package llmnexus serves durable-llm to workflows of other namespaces as
// the Nexus service workflows.NexusService ("durable-llm") with the
// asynchronous operation "call": CallRequest in, CallResult out, each
// call an LLMCall workflow in the worker's namespace.
//
// Invariants:
//
//   - The caller's namespace is the call's tenant, read from the link to
//     the caller's workflow that the Temporal server attaches to the
//     start; a tenant named in the request is overwritten, and a start
//     without that link is refused. Limits, spend caps, the answer cache
//     and idempotency are scoped by it as by a front-door tenant: the
//     call's workflow ID is request.IDs.For of the request with that
//     tenant, so one namespace never reaches another's call.
//   - The workflow ID is a pure function of the tenant and the request
//     (its idempotency key, which llmworkflow.CallNexus derives from the
//     caller's workflow ID and turn): a retried start attaches to the
//     running call (conflict policy USE_EXISTING) instead of calling the
//     model twice.
//   - Cancelling the operation cancels the call.
package llmnexus
