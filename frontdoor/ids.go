package frontdoor

import (
	"fmt"
	"net"
	"strings"

	"github.com/durable-llm/durable-llm/policies/request"
)

// IDsFor returns the workflow IDs of a front door that listens on addr:
// keyed with the deployment secret of request.EnvIDSecret (LLM_ID_SECRET),
// which every client of the deployment shares. Without a secret the IDs
// are plain SHA-256 of the request, which anyone who can list workflows
// can confirm a guessed prompt against, and anyone with write access to
// the namespace can start before the tenant does: IDsFor allows that only
// on a loopback address (local development) and refuses any other.
func IDsFor(addr string, getenv func(string) string) (request.IDs, error) {
	ids, err := request.IDsFromEnv(getenv)
	if err != nil {
		return ids, err
	}
	if !ids.Keyed() && !loopback(addr) {
		return ids, fmt.Errorf("the front door listens on %s, beyond this machine, and %s is not set: "+
			"set it to a secret of at least %d bytes shared by every client of the deployment "+
			"(e.g. openssl rand -hex 32), so workflow IDs cannot be guessed; "+
			"without one the front door only listens on a loopback address (127.0.0.1, ::1, localhost)",
			addr, request.EnvIDSecret, request.MinIDSecretLen)
	}
	return ids, nil
}

// loopback reports whether the listen address addr (host:port) only
// accepts connections from this machine; an empty host listens on every
// interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
