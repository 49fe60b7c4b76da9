package cluster_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/testkit/cluster"
)

// TestPortsAreDistinct: make cluster's ports and the tests' free ones give
// every listener its own port, each front door's /metrics included (two
// doors on one address: the second runs without metrics).
func TestPortsAreDistinct(t *testing.T) {
	free, err := cluster.FreePorts(3, 2)
	require.NoError(t, err)
	for name, p := range map[string]cluster.Ports{"DefaultPorts": cluster.DefaultPorts(3, 2), "FreePorts": free} {
		require.Len(t, p.FrontDoorMetrics, 2, "%s: front doors' metrics ports", name)
		owner := map[int]string{}
		v := reflect.ValueOf(p)
		for i := range v.NumField() {
			f := v.Type().Field(i).Name
			ports := []int{}
			switch x := v.Field(i).Interface().(type) {
			case int:
				ports = append(ports, x)
			case []int:
				ports = append(ports, x...)
			}
			for j, port := range ports {
				what := fmt.Sprintf("%s[%d]", f, j)
				require.NotZero(t, port, "%s: %s", name, what)
				require.Empty(t, owner[port], "%s: %s and %s are both port %d", name, owner[port], what, port)
				owner[port] = what
			}
		}
	}
}
