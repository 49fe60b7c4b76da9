package request

import (
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

// imageRequest asks about one image: a text part, then the image at url.
func imageRequest(url string) Request {
	m := Message{Role: RoleUser}
	m.SetParts([]Part{{Type: PartText, Text: "What is in this picture?"}, {Type: PartImageURL, ImageURL: &ImageURL{URL: url}}})
	return Request{Messages: []Message{{Role: RoleSystem, Content: "Describe images."}, m}}
}

// TestValidateRefusesImageURLsIntoTheNetwork: an image URL a self-hosted
// model server would fetch from inside the network is refused, naming the
// part, in every form a URL parser reads an address in; public hosts,
// data URIs and the hosts the policy allows are accepted. No DNS lookup
// is made (the names here do not resolve).
func TestValidateRefusesImageURLsIntoTheNetwork(t *testing.T) {
	cfg := config.DefaultConfig()
	for _, tc := range []struct {
		name, url string
		says      string // "" when accepted
	}{
		{"public host", "https://upload.wikimedia.org/a.png", ""},
		{"public host with a port and a trailing dot", "http://images.example.com.:8080/a.png", ""},
		{"public IPv4", "http://93.184.215.14/a.png", ""},
		{"public IPv6", "http://[2606:4700::6810:84e5]/a.png", ""},
		{"public IPv4 in IPv6", "http://[::ffff:93.184.215.14]/a.png", ""},
		{"internationalized public name", "https://例子.中国/a.png", ""},
		{"a data URI", "data:image/png;base64,iVBORw0KGgo=", ""},

		{"loopback", "http://127.0.0.1/a.png", "a loopback address (127.0.0.0/8)"},
		{"loopback elsewhere in 127/8", "http://127.8.9.10:9000/a.png", "a loopback address"},
		{"localhost", "http://localhost:8000/v1/models", "an internal host name"},
		{"localhost in capitals with a dot", "http://LOCALHOST./a.png", "an internal host name"},
		{"a name under localhost", "http://app.localhost/a.png", "an internal host name"},
		{"full-width localhost", "http://ｌｏｃａｌｈｏｓｔ/a.png", "an internal host name"},
		{"cloud metadata", "http://169.254.169.254/latest/meta-data/", "a link-local address (169.254.0.0/16"},
		{"GCP metadata by name", "http://metadata.google.internal/computeMetadata/v1/", "an internal host name"},
		{"a name without a dot", "http://metadata/computeMetadata/v1/", "an internal host name"},
		{"a Kubernetes service", "http://vllm.default.svc/a.png", "an internal host name"},
		{"mDNS", "http://printer.local/a.png", "an internal host name"},
		{"private 10/8", "http://10.0.0.5:8000/a.png", "a private address (10.0.0.0/8)"},
		{"private 172.16/12", "https://172.31.255.1/a.png", "a private address (172.16.0.0/12)"},
		{"private 192.168/16", "http://192.168.1.1/a.png", "a private address (192.168.0.0/16)"},
		{"CGNAT", "http://100.100.100.200/latest/meta-data/", "a shared address (100.64.0.0/10"},
		{"unspecified", "http://0.0.0.0:8000/a.png", "an unspecified address (0.0.0.0/8)"},
		{"broadcast", "http://255.255.255.255/a.png", "a reserved or broadcast address"},
		{"multicast", "http://224.0.0.1/a.png", "a multicast address"},
		{"decimal IPv4", "http://2130706433/a.png", "a loopback address"},
		{"hex IPv4", "http://0x7f000001/a.png", "a loopback address"},
		{"hex and short", "http://0x7f.1/a.png", "a loopback address"},
		{"octal", "http://0177.0.0.01/a.png", "a loopback address"},
		{"octal that is public, decimal loopback", "http://0127.0.0.1/a.png", "a loopback address (127.0.0.0/8) when its parts with a leading 0 are read as decimal"},
		{"leading zeros, public either way", "http://0123.184.215.014/a.png", ""},
		{"an octal part with a 9", "http://093.184.215.14/a.png", "ends in a number but is not an IPv4 address"},
		{"two parts", "http://10.1/a.png", "a private address (10.0.0.0/8)"},
		{"three parts", "http://169.254.43518/", "a link-local address"},
		{"full-width digits and dots", "http://１２７。０。０。１/a.png", "a loopback address"},
		{"a number that is no address", "http://999.1.1.1/a.png", "ends in a number but is not an IPv4 address"},
		{"octal with an 8", "http://08.0.0.1/a.png", "ends in a number but is not an IPv4 address"},
		{"IPv6 loopback", "http://[::1]:8000/a.png", "a loopback address (::1)"},
		{"IPv6 unspecified", "http://[::]/a.png", "an unspecified address (::)"},
		{"IPv6 link-local with a zone", "http://[fe80::1%25eth0]/a.png", "a link-local address (fe80::/10)"},
		{"IPv6 unique local (AWS metadata)", "http://[fd00:ec2::254]/latest/meta-data/", "a private address (fc00::/7"},
		{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]/a.png", "a loopback address (127.0.0.0/8)"},
		{"IPv4-mapped metadata in hex", "http://[::ffff:a9fe:a9fe]/a.png", "a link-local address"},
		{"IPv4-compatible", "http://[::10.0.0.1]/a.png", "a private address (10.0.0.0/8), inside an IPv6 address"},
		{"NAT64", "http://[64:ff9b::a9fe:a9fe]/a.png", "a link-local address (169.254.0.0/16, where cloud metadata services answer), inside an IPv6 address"},
		{"6to4", "http://[2002:7f00:1::]/a.png", "a loopback address (127.0.0.0/8), inside an IPv6 address"},
		{"Teredo", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/a.png", "a Teredo address"},
		{"credentials", "https://user:secret@images.example.com/a.png", "a URL with credentials (user:password@)"},
		{"an empty user", "https://@images.example.com/a.png", "a URL with credentials"},
		{"a backslash", `http://images.example.com/a\b.png`, "a URL with a backslash"},
		{"a backslash before an @", `http://images.example.com\@127.0.0.1/a.png`, "not an http(s) URL"},
		{"not http", "file:///etc/passwd", "not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(imageRequest(tc.url), cfg)
			if tc.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			want := "messages[1].content[1].image_url.url: "
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q, want %s…%s", err, want, tc.says)
			}
			if strings.Contains(err.Error(), tc.url) {
				t.Errorf("the error echoes the URL: %q", err)
			}
		})
	}
}

// TestAllowImageHosts: request.allow_image_hosts lets listed hosts in by
// name, by domain, by address and by prefix, and nothing else.
func TestAllowImageHosts(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Request.AllowImageHosts = []string{"images.internal", "*.cdn.internal", "10.1.0.0/16", "::1", "Metadata"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		allowed bool
	}{
		{"http://images.internal/a.png", true},
		{"http://IMAGES.internal./a.png", true},
		{"http://other.internal/a.png", false},
		{"http://eu.cdn.internal/a.png", true},
		{"http://cdn.internal/a.png", false}, // *. is the names under it
		{"http://10.1.2.3/a.png", true},
		{"http://0x0a010203/a.png", true}, // 10.1.2.3 in hex
		{"http://10.2.0.1/a.png", false},
		{"http://[::1]:8000/a.png", true},
		{"http://[::ffff:10.1.0.9]/a.png", true},
		{"http://127.0.0.1/a.png", false},
		{"http://metadata/a.png", true},
		{"http://user:pw@images.internal/a.png", false}, // credentials are never allowed
	} {
		t.Run(tc.url, func(t *testing.T) {
			err := Validate(imageRequest(tc.url), cfg)
			if (err == nil) != tc.allowed {
				t.Errorf("allowed = %v (%v), want %v", err == nil, err, tc.allowed)
			}
		})
	}
}

func TestLegacyIPv4(t *testing.T) {
	for _, tc := range []struct {
		host, want string
	}{
		{"2130706433", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0x7f.0x0.0x0.0x1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"192.168.257", "192.168.1.1"},
		{"0x", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"256.1.1.1", ""},
		{"1.2.3.4.5", ""},
		{"1.2.0x1g", ""},
	} {
		t.Run(tc.host, func(t *testing.T) {
			a, ok := legacyIPv4(strings.Split(tc.host, "."))
			got := ""
			if ok {
				got = a.String()
			}
			if got != tc.want {
				t.Errorf("legacyIPv4(%q) = %q, want %q", tc.host, got, tc.want)
			}
		})
	}
}
