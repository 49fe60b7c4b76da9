package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// RequestConfig is what a request may name or point to besides its
// limits (docs/security.md).
type RequestConfig struct {
	// Scenarios a request may name besides those that Rules and
	// Hedge.Scenarios name (KnownScenario); a request naming another is
	// refused, so that a misspelt scenario never skips its rules. "*"
	// accepts any scenario, and so does a policy that names none.
	Scenarios []string `yaml:"scenarios"`
	// AllowImageHosts are the hosts an image URL may point to although
	// they are inside the network (loopback, link-local, private or
	// shared addresses, internal names such as localhost or *.internal),
	// which are refused otherwise: host names ("images.corp.example"),
	// "*.corp.example" for the names under a domain, IP addresses and
	// CIDR prefixes ("10.1.0.0/16"). Empty by default.
	AllowImageHosts []string `yaml:"allow_image_hosts"`
}

// AnyScenario in request.scenarios accepts every scenario.
const AnyScenario = "*"

// maxScenarioBytes is a scenario's size limit (a request's labels are at
// most 256 bytes: they reach search attributes).
const maxScenarioBytes = 256

// hostNameRE is a host name of allow_image_hosts, optionally "*." and a
// domain: ASCII labels of letters, digits, - and _.
var hostNameRE = regexp.MustCompile(`^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$`)

// KnownScenarios lists the scenarios a request may name, each once
// (case ignored), in the order request.scenarios, rules and
// hedge.scenarios name them.
func (c *Config) KnownScenarios() []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s == "" {
			return
		}
		for _, o := range out {
			if strings.EqualFold(o, s) {
				return
			}
		}
		out = append(out, s)
	}
	for _, s := range c.Request.Scenarios {
		add(s)
	}
	for _, r := range c.Rules {
		add(r.Scenario)
	}
	for _, h := range c.Hedge.Scenarios {
		add(h.Scenario)
	}
	return out
}

// KnownScenario reports whether a request may name scenario s: empty, a
// scenario of KnownScenarios (compared as rules compare them: case and
// surrounding spaces ignored), or any when request.scenarios holds "*" or
// the policy names no scenario at all (nothing a scenario selects).
func (c *Config) KnownScenario(s string) bool {
	s = strings.TrimSpace(s)
	known := c.KnownScenarios()
	if s == "" || len(known) == 0 || slices.Contains(c.Request.Scenarios, AnyScenario) {
		return true
	}
	for _, k := range known {
		if strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// validate checks the request section at path "request".
func (r RequestConfig) validate(bad func(path, format string, args ...any)) {
	seen := map[string]int{}
	for i, s := range r.Scenarios {
		p := fmt.Sprintf("request.scenarios[%d]", i)
		k := strings.ToLower(strings.TrimSpace(s))
		switch {
		case k == "":
			bad(p, "must be a scenario name (or \"*\" for any), got %q", s)
		case len(s) > maxScenarioBytes:
			bad(p, "must be at most %d bytes (a request's scenario is), got %d", maxScenarioBytes, len(s))
		default:
			if j, dup := seen[k]; dup {
				bad(p, "names %q a second time (also request.scenarios[%d]; case is ignored)", s, j)
			}
			seen[k] = i
		}
	}
	for i, h := range r.AllowImageHosts {
		p := fmt.Sprintf("request.allow_image_hosts[%d]", i)
		e := strings.TrimSuffix(strings.Trim(strings.TrimSpace(h), "[]"), ".")
		if _, err := netip.ParseAddr(e); err == nil {
			continue
		}
		if _, err := netip.ParsePrefix(e); err == nil {
			continue
		}
		if !hostNameRE.MatchString(strings.ToLower(e)) {
			bad(p, "must be a host name (images.corp.example), *. and a domain, an IP address or a CIDR prefix (10.1.0.0/16), without scheme, port or path; internationalized names in their xn-- form; got %q", h)
		}
	}
}
