package request

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Image URLs are fetched by the model server, which for a self-hosted
// ladder (vLLM, the default's kind) sits inside the network: a URL to
// loopback, link-local (cloud metadata at 169.254.169.254), private or
// shared addresses, or to a name only the inside resolves, would have it
// fetch from the inside on a caller's behalf. imageURLProblem refuses
// them unless the policy allows the host (request.allow_image_hosts).
//
// The host is read as written, in every form URL parsers accept for an
// address (decimal, octal and hex IPv4 such as 2130706433 or 0x7f.1,
// IPv6 with a zone, IPv4 inside IPv6: mapped ::ffff:127.0.0.1,
// compatible, NAT64 and 6to4), after the IDNA mapping that turns
// full-width digits and dots into ASCII. It is never resolved: a public
// name whose DNS answer is a private address is the model server's to
// refuse (docs/security.md).

// hostAllowHint ends every refusal of a host.
const hostAllowHint = "; the policy's request.allow_image_hosts can allow a host"

// imageURLProblem says why the http(s) image URL raw may not be sent, or
// "". URLs that are not http(s) or do not parse are imageProblem's.
func imageURLProblem(raw string, allow []string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	if strings.Contains(raw, `\`) {
		return `a URL with a backslash, which URL parsers read differently (escape it as %5C)`
	}
	if u.User != nil {
		return "a URL with credentials (user:password@), which an image URL may not carry"
	}
	host, addr, problem := parseHost(u.Hostname())
	if problem != "" {
		return problem
	}
	if hostAllowed(host, addr, allow) {
		return ""
	}
	if addr.IsValid() {
		if what := addressKind(addr); what != "" {
			return "a URL to " + what + hostAllowHint
		}
		// 0177.0.0.1 is 127.0.0.1 to parsers that read a leading 0 as
		// decimal (Python's ipaddress before 3.9.5 did), 127.0.0.1 to
		// inet_aton: refused when either reading is refused.
		if alt, ok := decimalReading(host); ok && alt != addr && !hostAllowed(host, alt, allow) {
			if what := addressKind(alt); what != "" {
				return "a URL to " + what + " when its parts with a leading 0 are read as decimal, as some parsers do" + hostAllowHint
			}
		}
		return ""
	}
	if internalName(host) {
		return "a URL to an internal host name (localhost, a name without a dot, .local, .internal, .localdomain, .home.arpa, .svc), which only the network's inside resolves" + hostAllowHint
	}
	return ""
}

// parseHost reads a URL's host: lower case, one trailing dot dropped,
// non-ASCII names mapped by IDNA (full-width digits and dots become
// ASCII), and, when it is an address in any form, that address (zone
// dropped).
func parseHost(h string) (host string, addr netip.Addr, problem string) {
	h = strings.TrimSuffix(h, ".")
	if !isASCII(h) {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return "", addr, "a URL whose host is not a valid host name"
		}
		h = strings.TrimSuffix(a, ".")
	}
	h = strings.ToLower(h)
	if a, err := netip.ParseAddr(h); err == nil {
		return h, a.WithZone(""), ""
	}
	if h == "" || strings.HasPrefix(h, ".") || strings.Contains(h, "..") || strings.HasSuffix(h, ".") {
		return "", addr, "a URL whose host is not a valid host name"
	}
	labels := strings.Split(h, ".")
	if !numericLabel(labels[len(labels)-1]) {
		return h, addr, ""
	}
	// A name that ends in a number is an IPv4 address to URL parsers
	// (WHATWG), and to inet_aton: 1 to 4 parts, each decimal, octal
	// (leading 0) or hex (0x), the last filling the remaining bytes.
	a, ok := legacyIPv4(labels)
	if !ok {
		return "", addr, "a URL whose host ends in a number but is not an IPv4 address"
	}
	return h, a, ""
}

// numericLabel reports whether a host's label is a number to WHATWG's
// "ends in a number" check: decimal digits, or 0x and hex digits.
func numericLabel(l string) bool {
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// decimalReading is host read as an IPv4 address whose parts with a
// leading 0 are decimal, not octal; ok is false when host has no such
// part or is no address that way.
func decimalReading(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	octal := false
	for i, p := range parts {
		if len(p) > 1 && p[0] == '0' && p[1] != 'x' {
			parts[i], octal = strings.TrimLeft(p, "0"), true
			if parts[i] == "" {
				parts[i] = "0"
			}
		}
	}
	if !octal {
		return netip.Addr{}, false
	}
	return legacyIPv4(parts)
}

// legacyIPv4 reads the parts of an IPv4 address as inet_aton does.
func legacyIPv4(parts []string) (netip.Addr, bool) {
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			p, base = p[2:], 16
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		n, err := strconv.ParseUint(p, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		last := i == len(parts)-1
		if !last {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (4 - i)) // the bytes the last part fills
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// blocked are the address ranges an image URL may not point to, with the
// words that name them.
var blocked = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address (0.0.0.0/8)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address (127.0.0.0/8)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (169.254.0.0/16, where cloud metadata services answer)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address (10.0.0.0/8)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address (172.16.0.0/12)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address (192.168.0.0/16)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared address (100.64.0.0/10, carrier-grade NAT and some clouds' metadata)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved address (192.0.0.0/24)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a reserved address (198.18.0.0/15)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a reserved address (documentation)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a reserved address (documentation)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a reserved address (documentation)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address (224.0.0.0/4)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address (240.0.0.0/4)"},
	{netip.MustParsePrefix("::/128"), "an unspecified address (::)"},
	{netip.MustParsePrefix("::1/128"), "a loopback address (::1)"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address (fe80::/10)"},
	{netip.MustParsePrefix("fec0::/10"), "a private address (fec0::/10, site-local)"},
	{netip.MustParsePrefix("fc00::/7"), "a private address (fc00::/7, where AWS's metadata service answers too)"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address (ff00::/8)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a private address (64:ff9b:1::/48, local NAT64)"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address (2001::/32), which hides the IPv4 address it reaches"},
	{netip.MustParsePrefix("2001:db8::/32"), "a reserved address (documentation)"},
	{netip.MustParsePrefix("100::/64"), "a reserved address (100::/64, discard)"},
}

// Prefixes of IPv6 addresses that carry an IPv4 address: in their last 32
// bits (compatible, NAT64), or after 2002: (6to4).
var (
	compatible = netip.MustParsePrefix("::/96")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	globalV6   = netip.MustParsePrefix("2000::/3")
)

// addressKind names the kind of a, when an image URL may not point to
// it, or "".
func addressKind(a netip.Addr) string {
	a = a.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if a.Is6() {
		b := a.As16()
		var inner netip.Addr
		switch {
		case compatible.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
			inner = netip.AddrFrom4([4]byte(b[12:16]))
		case nat64.Contains(a):
			inner = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(a):
			inner = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if inner.IsValid() {
			if what := addressKind(inner); what != "" {
				return what + ", inside an IPv6 address"
			}
			return ""
		}
	}
	for _, r := range blocked {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	if a.Is6() && !globalV6.Contains(a) {
		return "a reserved address (outside 2000::/3, IPv6's global unicast)"
	}
	return ""
}

// internalSuffixes are the name suffixes only a network's inside
// resolves: special-use names (RFC 6761, 6762, 8375), ICANN's private
// .internal, and Kubernetes' service names.
var internalSuffixes = []string{".localhost", ".local", ".internal", ".localdomain", ".home.arpa", ".svc"}

// internalName reports whether a host name is one only the network's
// inside resolves: localhost, a name without a dot (found through the
// resolver's search domains), or one of internalSuffixes.
func internalName(host string) bool {
	if host == "localhost" || !strings.Contains(host, ".") {
		return true
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(host, s) || host == s[1:] {
			return true
		}
	}
	return false
}

// hostAllowed reports whether allow lists host: by name (case ignored,
// "*.example.com" for any name under example.com), or, for an address, by
// an address or a CIDR prefix that holds it.
func hostAllowed(host string, addr netip.Addr, allow []string) bool {
	for _, e := range allow {
		e = strings.ToLower(strings.TrimSuffix(strings.Trim(strings.TrimSpace(e), "[]"), "."))
		switch {
		case addr.IsValid():
			if p, err := netip.ParsePrefix(e); err == nil && p.Contains(addr.Unmap()) {
				return true
			}
			if a, err := netip.ParseAddr(e); err == nil && a.WithZone("").Unmap() == addr.Unmap() {
				return true
			}
		case strings.HasPrefix(e, "*."):
			if strings.HasSuffix(host, e[1:]) {
				return true
			}
		case e == host:
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// validateImageHosts refuses image parts whose URL points inside the
// network (imageURLProblem), naming the part.
func validateImageHosts(e *ValidationError, msgs []Message, allow []string) {
	for i, m := range msgs {
		for j, p := range m.Parts {
			if p.Type != PartImageURL || p.ImageURL == nil {
				continue
			}
			if prob := imageURLProblem(p.ImageURL.URL, allow); prob != "" {
				e.add(fmt.Sprintf("messages[%d].content[%d].image_url.url", i, j), "%s", prob)
			}
		}
	}
}
