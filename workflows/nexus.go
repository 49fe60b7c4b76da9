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
)
