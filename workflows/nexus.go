package workflows

// The Nexus service that serves LLMCall to workflows of other namespaces
// (package llmnexus registers it, llmworkflow.CallNexus calls it).
const (
	// NexusService is the Nexus service's name.
	NexusService = "durable-llm"
	// NexusOperationCall is its operation: input CallRequest, output
	// CallResult, asynchronous (an LLMCall workflow in the service's
	// namespace, whose tenant is the caller's namespace).
	NexusOperationCall = "call"
	// NexusOperationCallQuick is call with a quick answer: a call that
	// completes within the handler's short wait is answered in the
	// operation's start response (no completion callback); a longer one
	// goes on as call does. Same input, output, tenant and IDs.
	NexusOperationCallQuick = "call_quick"
)
