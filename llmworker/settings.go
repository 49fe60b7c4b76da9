package llmworker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// SettingsPrint is what every process of a deployment must share
// (docs/calling.md "Settings every process shares"), each as a short
// hash: the ladder (its models, in order), the ID secret (workflow IDs
// keyed alike) and the payload keys (payloads one encrypts, the others
// read). A worker carries it in its identity, which the task queue lists
// with its pollers, so a front door or `starter doctor` can compare its
// own without reading any worker's settings. A hash of eight hex digits
// says nothing usable of a secret.
type SettingsPrint struct {
	Ladder, IDs, Keys string
}

// PrintSettings is the SettingsPrint of cfg's ladder and of the ID secret
// and payload keys getenv reads.
func PrintSettings(cfg *config.Config, getenv func(string) string) SettingsPrint {
	names := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		names[i] = m.Name
	}
	return SettingsPrint{
		Ladder: shortHash("ladder", strings.Join(names, ",")),
		IDs:    shortHash("ids", strings.TrimSpace(getenv(request.EnvIDSecret))),
		Keys:   shortHash("keys", strings.TrimSpace(getenv(codec.EnvKeys))),
	}
}

// shortHash is eight hex digits of value's hash under its kind; "none"
// for an empty value.
func shortHash(kind, value string) string {
	if value == "" {
		return "none"
	}
	h := sha256.Sum256([]byte("durable-llm settings " + kind + "\x00" + value))
	return hex.EncodeToString(h[:4])
}

// String is the print as it stands in a worker's identity.
func (p SettingsPrint) String() string {
	return fmt.Sprintf("durable-llm[ladder=%s ids=%s keys=%s]", p.Ladder, p.IDs, p.Keys)
}

var printRE = regexp.MustCompile(`durable-llm\[ladder=([0-9a-f]{8}|none) ids=([0-9a-f]{8}|none) keys=([0-9a-f]{8}|none)\]`)

// ParseSettingsPrint reads the print in a worker's identity.
func ParseSettingsPrint(identity string) (SettingsPrint, bool) {
	m := printRE.FindStringSubmatch(identity)
	if m == nil {
		return SettingsPrint{}, false
	}
	return SettingsPrint{Ladder: m[1], IDs: m[2], Keys: m[3]}, true
}

// Differ words each setting p and q do not share, as the settings a
// process is given.
func (p SettingsPrint) Differ(q SettingsPrint) []string {
	var out []string
	if p.Ladder != q.Ladder {
		out = append(out, "the ladder (POLICY_FILE, LLM_MODELS)")
	}
	if p.IDs != q.IDs {
		out = append(out, request.EnvIDSecret)
	}
	if p.Keys != q.Keys {
		out = append(out, codec.EnvKeys)
	}
	return out
}

// CompareFleetSettings compares mine with the prints of the workers that
// poll queue (DescribeTaskQueue: no workflow task, nothing written) and
// words each difference: which setting, and which workers' identities
// have it otherwise. Workers of builds before the print are not judged.
func CompareFleetSettings(ctx context.Context, c client.Client, queue string, mine SettingsPrint) ([]string, error) {
	d, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return nil, err
	}
	differ := map[string][]string{}
	for _, p := range d.GetPollers() {
		theirs, ok := ParseSettingsPrint(p.GetIdentity())
		if !ok {
			continue
		}
		who := strings.TrimSpace(printRE.ReplaceAllString(p.GetIdentity(), ""))
		for _, s := range mine.Differ(theirs) {
			if !slices.Contains(differ[s], who) {
				differ[s] = append(differ[s], who)
			}
		}
	}
	var out []string
	for _, s := range []string{"the ladder (POLICY_FILE, LLM_MODELS)", request.EnvIDSecret, codec.EnvKeys} {
		if who := differ[s]; len(who) > 0 {
			out = append(out, fmt.Sprintf("%s differs from that of the workers on %s (%s)", s, queue, strings.Join(who, ", ")))
		}
	}
	return out, nil
}
