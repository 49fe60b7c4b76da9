package cluster

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"text/template"
)

// Ports of a cluster, all on 127.0.0.1.
type Ports struct {
	Postgres int
	// Temporal's services: gRPC and membership ports of each, and the
	// frontend's HTTP API.
	Frontend, FrontendHTTP, History, Matching, InternalWorker                   int
	FrontendMembership, HistoryMembership, MatchingMembership, WorkerMembership int
	UI, LLMSim                                                                  int
	// FrontDoors, Metrics (the workers' /metrics) and FrontDoorMetrics
	// (the front doors' /metrics) have one port each: two processes on
	// one host cannot share an address, and a front door that cannot
	// take its own runs without metrics.
	FrontDoors, Metrics, FrontDoorMetrics []int
}

// DefaultPorts are those of `make cluster`: Temporal on 7233 and its Web
// UI on 8233 as with `make run`, PostgreSQL on 5433 (beside a system one
// on 5432), the front doors from 8080, the workers' metrics from 9464 and
// the front doors' metrics right after the workers' (9467 and 9468 for
// three workers and two front doors).
func DefaultPorts(workers, frontDoors int) Ports {
	p := Ports{
		Postgres: 5433, Frontend: 7233, FrontendHTTP: 7243, History: 7234, Matching: 7235, InternalWorker: 7239,
		FrontendMembership: 6933, HistoryMembership: 6934, MatchingMembership: 6935, WorkerMembership: 6939,
		UI: 8233, LLMSim: 8000,
	}
	for i := range frontDoors {
		p.FrontDoors = append(p.FrontDoors, 8080+i)
	}
	for i := range workers {
		p.Metrics = append(p.Metrics, 9464+i)
	}
	for i := range frontDoors {
		p.FrontDoorMetrics = append(p.FrontDoorMetrics, 9464+workers+i)
	}
	return p
}

// FreePorts picks free ports for every service (for tests).
func FreePorts(workers, frontDoors int) (Ports, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	// Every port is below 32768, where the kernel hands out no ephemeral
	// ports: a port picked now is bound by its process seconds later
	// (after PostgreSQL's and Temporal's start), and in the meantime any
	// outgoing connection or ":0" listener on the machine could take an
	// ephemeral one. Temporal also keeps membership ports in a smallint
	// column of PostgreSQL. Each is held until all are picked: no port twice.
	failed := false
	free := func() int {
		for range 200 {
			port := 10000 + mrand.IntN(22000)
			if ln, err := net.Listen("tcp", addr(port)); err == nil {
				lns = append(lns, ln)
				return port
			}
		}
		failed = true
		return 0
	}
	p := Ports{
		Postgres: free(), Frontend: free(), FrontendHTTP: free(), History: free(), Matching: free(), InternalWorker: free(),
		FrontendMembership: free(), HistoryMembership: free(), MatchingMembership: free(), WorkerMembership: free(),
		UI: free(), LLMSim: free(),
	}
	for range frontDoors {
		p.FrontDoors = append(p.FrontDoors, free())
	}
	for range workers {
		p.Metrics = append(p.Metrics, free())
	}
	for range frontDoors {
		p.FrontDoorMetrics = append(p.FrontDoorMetrics, free())
	}
	if failed {
		return Ports{}, fmt.Errorf("no free port on 127.0.0.1")
	}
	return p, nil
}

// serverConfig is Temporal's server configuration: both stores on
// PostgreSQL (SQL visibility holds the LLM search attributes), every
// service in one process, bound to 127.0.0.1.
var serverConfig = template.Must(template.New("temporal").Parse(`# Written by durable-llm's cluster (testkit/cluster); rewritten at each start.
log:
  stdout: true
  level: warn

persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: 4
  datastores:
    default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:{{.Ports.Postgres}}"
        connectProtocol: tcp
        user: postgres
        password: ""
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:{{.Ports.Postgres}}"
        connectProtocol: tcp
        user: postgres
        password: ""
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1

services:
  frontend:
    rpc:
      grpcPort: {{.Ports.Frontend}}
      membershipPort: {{.Ports.FrontendMembership}}
      bindOnIP: 127.0.0.1
      httpPort: {{.Ports.FrontendHTTP}}
  matching:
    rpc:
      grpcPort: {{.Ports.Matching}}
      membershipPort: {{.Ports.MatchingMembership}}
      bindOnIP: 127.0.0.1
  history:
    rpc:
      grpcPort: {{.Ports.History}}
      membershipPort: {{.Ports.HistoryMembership}}
      bindOnIP: 127.0.0.1
  worker:
    rpc:
      grpcPort: {{.Ports.InternalWorker}}
      membershipPort: {{.Ports.WorkerMembership}}
      bindOnIP: 127.0.0.1

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:{{.Ports.Frontend}}"

dcRedirectionPolicy:
  policy: noop

dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`))

// dynamicConfig: search attributes are read fresh (no wait after they
// are registered), as on the dev server; eager activity dispatch, so the
// worker that completes a workflow task starts the activity it schedules
// without a round trip through matching (docs/operating.md "A call's
// floor"). The task queues keep their default partitions: a cluster's
// many workers spread over them.
const dynamicConfig = `# Written by durable-llm's cluster (testkit/cluster).
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
system.enableActivityEagerExecution:
  - value: true
frontend.persistenceMaxQPS:
  - value: 10000
history.persistenceMaxQPS:
  - value: 45000
`

// uiConfig is the Web UI server's configuration.
var uiConfig = template.Must(template.New("ui").Parse(`# Written by durable-llm's cluster (testkit/cluster).
temporalGrpcAddress: "127.0.0.1:{{.Ports.Frontend}}"
host: 127.0.0.1
port: {{.Ports.UI}}
enableUi: true
defaultNamespace: default
refreshInterval: 0s
cors:
  cookieInsecure: true
hideLogs: true
`))

// writeConfigs writes the server's and the Web UI's configuration under
// dir: dir/temporal/config/development.yaml (with the dynamic config
// beside it) and dir/ui/config/development.yaml.
func writeConfigs(dir string, ports Ports) error {
	tconf := filepath.Join(dir, "temporal", "config")
	uconf := filepath.Join(dir, "ui", "config")
	for _, d := range []string{tconf, uconf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	dyn := filepath.Join(tconf, "dynamicconfig.yaml")
	if err := os.WriteFile(dyn, []byte(dynamicConfig), 0o644); err != nil {
		return err
	}
	data := struct {
		Ports         Ports
		DynamicConfig string
	}{ports, dyn}
	for path, t := range map[string]*template.Template{
		filepath.Join(tconf, "development.yaml"): serverConfig,
		filepath.Join(uconf, "development.yaml"): uiConfig,
	} {
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
