package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultSetting returns the default of the policy setting at key, a
// dotted path ("budget.ratio", "model_defaults.first_token_timeout"), as
// default_policy.yaml writes it; false when the default policy has no such
// scalar or list setting. The guard's page shows the settings its rules
// read this way.
func DefaultSetting(key string) (string, bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(defaultPolicyYAML, &doc); err != nil || len(doc.Content) == 0 {
		return "", false
	}
	n := doc.Content[0]
	for _, part := range strings.Split(key, ".") {
		if n.Kind != yaml.MappingNode {
			return "", false
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return "", false
		}
		n = next
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, true
	case yaml.SequenceNode:
		var items []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return "", false
			}
			items = append(items, c.Value)
		}
		return "[" + strings.Join(items, ", ") + "]", true
	}
	return "", false
}
