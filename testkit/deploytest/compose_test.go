package deploytest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/workflows"
)

const composeFile = "../../docker-compose.yml"

// load reads docker-compose.yml with every profile active, as
// `docker compose --profile '*' config` does, with an empty environment
// (only the file's own defaults).
func load(t *testing.T) *types.Project {
	t.Helper()
	o, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory("../.."), cli.WithEnv(nil), cli.WithProfiles([]string{"*"}))
	require.NoError(t, err)
	p, err := o.LoadProject(context.Background())
	require.NoError(t, err, "docker-compose.yml does not load")
	return p
}

func TestComposeFileLoads(t *testing.T) {
	p := load(t)
	require.Equal(t, "durable-llm", p.Name)
	for _, name := range []string{"postgresql", "temporal-schema", "temporal", "temporal-setup", "ui", "llmsim", "worker", "starter", "codec-server", "frontdoor"} {
		_, err := p.GetService(name)
		require.NoError(t, err, "service %s", name)
	}
	for name, s := range p.Services {
		if s.Build == nil {
			require.NotEmpty(t, s.Image, name)
			require.Regexp(t, `:[0-9][0-9.]*$`, s.Image, "service %s: official images are pinned to a version", name)
		}
	}
}

// TestDockerComposeConfig runs the real `docker compose config -q` (or
// docker-compose v2, or $DOCKER_COMPOSE) when it is installed; it needs no
// Docker engine.
func TestDockerComposeConfig(t *testing.T) {
	var cmd *exec.Cmd
	switch {
	case os.Getenv("DOCKER_COMPOSE") != "": // a Compose v2 binary of one's choice
		cmd = exec.Command(os.Getenv("DOCKER_COMPOSE"), "-f", composeFile, "--profile", "*", "config", "-q")
	case exec.Command("docker", "compose", "version").Run() == nil:
		cmd = exec.Command("docker", "compose", "-f", composeFile, "--profile", "*", "config", "-q")
	case composeV2("docker-compose"):
		cmd = exec.Command("docker-compose", "-f", composeFile, "--profile", "*", "config", "-q")
	default:
		t.Skip("docker compose (v2) is not installed: docker-compose.yml was checked with the compose-spec loader only (TestComposeFileLoads)")
	}
	cmd.Env = append(os.Environ(), "COMPOSE_PROJECT_NAME=durable-llm")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", strings.Join(cmd.Args, " "), out)
}

// composeV2 tells whether bin is Compose v2 or later (v1, end of life,
// lacks the top-level name and other parts of the compose spec).
func composeV2(bin string) bool {
	out, err := exec.Command(bin, "version", "--short").Output()
	if err != nil {
		return false
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 2
}

func TestWorkerScales(t *testing.T) {
	w, err := load(t).GetService("worker")
	require.NoError(t, err)
	require.Empty(t, w.ContainerName, "a fixed container_name breaks --scale worker=N")
	for _, port := range w.Ports {
		require.Empty(t, port.Published, "a host port breaks --scale worker=N")
	}
	dep, ok := w.DependsOn["temporal-setup"]
	require.True(t, ok, "the worker waits for the search attributes")
	require.Equal(t, types.ServiceConditionCompletedSuccessfully, dep.Condition)
	require.Equal(t, types.ServiceConditionHealthy, w.DependsOn["llmsim"].Condition)
	require.NotNil(t, w.HealthCheck)
	for _, env := range []string{"TEMPORAL_ADDRESS", "LLM_BASE_URL", "LLM_API_KEY", "LLM_MODELS", "LLM_PAYLOAD_KEYS", "METRICS_ADDR"} {
		_, ok := w.Environment[env]
		require.True(t, ok, "worker environment lacks %s", env)
	}
}

// TestSetupCreatesEverySearchAttribute keeps the one-shot service in step
// with the attributes the workflow sets.
func TestSetupCreatesEverySearchAttribute(t *testing.T) {
	s, err := load(t).GetService("temporal-setup")
	require.NoError(t, err)
	script := strings.Join(s.Command, " ")
	script = regexp.MustCompile(`\\\s*\n\s*`).ReplaceAllString(script, " ")
	for name, typ := range workflows.SearchAttributes {
		require.Regexp(t, `--name `+name+` --type `+typ+`\b`, script, "temporal-setup does not create %s (%s)", name, typ)
	}
	require.Equal(t, len(workflows.SearchAttributes), strings.Count(script, "--name "), "temporal-setup creates attributes the workflow does not set")
	require.Contains(t, s.Image, "temporalio/admin-tools:")
	require.Equal(t, types.ServiceConditionHealthy, s.DependsOn["temporal"].Condition)
}

func TestBuildTargetsExistInTheDockerfile(t *testing.T) {
	df, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	stages := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?mi)^FROM\s+\S+\s+AS\s+(\S+)`).FindAllStringSubmatch(string(df), -1) {
		stages[m[1]] = true
	}
	built := 0
	for name, s := range load(t).Services {
		if s.Build == nil {
			continue
		}
		built++
		require.Equal(t, "Dockerfile", filepath.Base(s.Build.Dockerfile), name)
		require.True(t, stages[s.Build.Target], "service %s builds target %q, which the Dockerfile lacks", name, s.Build.Target)
	}
	require.Equal(t, 5, built, "llmsim, worker, starter, codec-server and frontdoor are built here")
	// The build compiles every command the images run.
	for _, pkg := range []string{"./worker", "./starter", "./llmsim/cmd/llmsim"} {
		require.Contains(t, string(df), pkg)
		_, err := os.Stat(filepath.Join("../..", pkg))
		require.NoError(t, err)
	}
}

// TestWorkerSharesTheStore: the compose workers read a policy that puts
// the answer cache and the usage table in the stack's PostgreSQL, in the
// database store-setup creates, at a URL from the environment.
func TestWorkerSharesTheStore(t *testing.T) {
	p := load(t)
	w, err := p.GetService("worker")
	require.NoError(t, err)
	require.Equal(t, types.ServiceConditionCompletedSuccessfully, w.DependsOn["store-setup"].Condition)
	var policy string
	for _, v := range w.Volumes {
		if v.Target == "/etc/durable-llm/policy.yaml" {
			policy = v.Source
		}
	}
	require.NotEmpty(t, policy, "the worker mounts no policy file")
	require.Equal(t, "/etc/durable-llm/policy.yaml", *w.Environment["POLICY_FILE"])
	cfg, err := config.LoadConfig(policy)
	require.NoError(t, err)
	require.True(t, cfg.Store.Shared(), "the compose policy does not share the store")
	dsn := w.Environment[cfg.Store.DSNEnv]
	require.NotNil(t, dsn, "the worker environment lacks %s", cfg.Store.DSNEnv)
	setup, err := p.GetService("store-setup")
	require.NoError(t, err)
	require.Contains(t, strings.Join(setup.Command, " "), "CREATE DATABASE durable_llm")
	require.Contains(t, *dsn, "@postgresql:5432/durable_llm")
}

// TestTracingProfile: the trace viewer starts only with --profile
// tracing, takes OTLP over HTTP where the worker can send it, and the
// worker passes OTEL_EXPORTER_OTLP_ENDPOINT through (empty: tracing off).
func TestTracingProfile(t *testing.T) {
	p, err := cli.NewProjectOptions([]string{composeFile}, cli.WithName("durable-llm"), cli.WithWorkingDirectory("../.."), cli.WithEnv(nil), cli.WithProfiles([]string{"tracing"}))
	require.NoError(t, err)
	proj, err := p.LoadProject(context.Background())
	require.NoError(t, err)
	j, err := proj.GetService("jaeger")
	require.NoError(t, err)
	require.Equal(t, []string{"tracing"}, j.Profiles)
	require.Contains(t, j.Expose, "4318")
	w, err := proj.GetService("worker")
	require.NoError(t, err)
	_, ok := w.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
	require.True(t, ok)
	plain, err := cli.NewProjectOptions([]string{composeFile}, cli.WithName("durable-llm"), cli.WithWorkingDirectory("../.."), cli.WithEnv(nil))
	require.NoError(t, err)
	pp, err := plain.LoadProject(context.Background())
	require.NoError(t, err)
	_, err = pp.GetService("jaeger")
	require.Error(t, err, "the trace viewer starts without --profile tracing")
}

// TestComposeKeepsAPolicysEndpoints: the compose worker sends its models
// where its policy file names them. Without LLM_BASE_URL that is the
// stack's llmsim for the compose policy (the default ladder, every field
// as the embedded default's but base_url), and a policy of one's own
// (POLICY_FILE) keeps its endpoints: compose sets no LLM_BASE_URL that
// would send every model to llmsim.
func TestComposeKeepsAPolicysEndpoints(t *testing.T) {
	p := load(t)
	w, err := p.GetService("worker")
	require.NoError(t, err)
	base := w.Environment[config.EnvBaseURL]
	require.True(t, base == nil || *base == "", "compose sets LLM_BASE_URL=%s by default: it overrides every model's base_url", *base)

	var policy string
	for _, v := range w.Volumes {
		if v.Target == "/etc/durable-llm/policy.yaml" {
			policy = v.Source
		}
	}
	cfg, err := config.LoadConfig(policy)
	require.NoError(t, err)
	require.NoError(t, cfg.ApplyEnv(func(k string) string {
		if v := w.Environment[k]; v != nil {
			return *v
		}
		return ""
	}))
	def := config.DefaultConfig()
	require.Len(t, cfg.Models, len(def.Models))
	for i, m := range cfg.Models {
		require.Equal(t, "http://llmsim:8000/v1", m.BaseURL, "model %s", m.Name)
		m.BaseURL = def.Models[i].BaseURL
		require.Equal(t, def.Models[i], m, "the compose policy's %s differs from the default's in more than base_url", m.Name)
	}
}

// TestComposeProcessesShareTheSettings: the worker and the starter (the
// CLI, the front door) read the same ladder, ID secret, payload keys and
// policy from the environment compose is started with; one without them
// would refuse model names, key workflow IDs differently or not read the
// encrypted payloads (docs/calling.md "Settings every process shares").
func TestComposeProcessesShareTheSettings(t *testing.T) {
	env := map[string]string{"LLM_MODELS": "gpt-4o,gpt-4o-mini", "LLM_ID_SECRET": "id-secret", "LLM_PAYLOAD_KEYS": "k1", "POLICY_FILE": "/etc/mine.yaml"}
	o, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory("../.."), cli.WithEnv(func() []string {
			var kv []string
			for k, v := range env {
				kv = append(kv, k+"="+v)
			}
			return kv
		}()), cli.WithProfiles([]string{"*"}))
	require.NoError(t, err)
	p, err := o.LoadProject(context.Background())
	require.NoError(t, err)
	for _, name := range []string{"worker", "starter"} {
		s, err := p.GetService(name)
		require.NoError(t, err)
		for k, want := range env {
			got := s.Environment[k]
			require.NotNil(t, got, "service %s does not pass %s", name, k)
			require.Equal(t, want, *got, "service %s's %s", name, k)
		}
	}
}

// TestWebUIPortIsNotTheFrontDoors: the Web UI is published on make run's
// port (8233), not on the front door's default (127.0.0.1:8080, starter
// serve), and every link and origin that names it names that port.
func TestWebUIPortIsNotTheFrontDoors(t *testing.T) {
	p := load(t)
	ui, err := p.GetService("ui")
	require.NoError(t, err)
	require.Len(t, ui.Ports, 1)
	require.Equal(t, "8233", ui.Ports[0].Published, "the Web UI's host port")
	origin := "http://localhost:8233"
	require.Equal(t, origin, *ui.Environment["TEMPORAL_CORS_ORIGINS"])
	starter, err := p.GetService("starter")
	require.NoError(t, err)
	require.Equal(t, origin, *starter.Environment["TEMPORAL_UI"])
	codecServer, err := p.GetService("codec-server")
	require.NoError(t, err)
	require.Contains(t, strings.Join(codecServer.Command, " "), "--web-ui-origin "+origin)
}

// TestFrontDoorService: the front door's service serves on the address
// its docs give (the host's 127.0.0.1:8080), shares the workers' ladder,
// ID secret and payload keys, takes its tokens from the environment, and
// is given longer to stop than its drain.
func TestFrontDoorService(t *testing.T) {
	p := load(t)
	fd, err := p.GetService("frontdoor")
	require.NoError(t, err)
	require.Equal(t, []string{"frontdoor"}, fd.Profiles, "on demand: it needs LLM_ID_SECRET and tokens")
	require.Equal(t, "serve", fd.Command[0])
	require.Len(t, fd.Ports, 1)
	require.Equal(t, "8080", fd.Ports[0].Published)
	require.Equal(t, "127.0.0.1", fd.Ports[0].HostIP)
	worker, err := p.GetService("worker")
	require.NoError(t, err)
	for _, k := range []string{"POLICY_FILE", "LLM_MODELS", "LLM_ID_SECRET", "LLM_PAYLOAD_KEYS"} {
		require.Contains(t, fd.Environment, k)
		require.Equal(t, *worker.Environment[k], *fd.Environment[k], "%s as the workers have it", k)
	}
	require.Contains(t, fd.Environment, "FRONTDOOR_TOKENS")
	drain, err := time.ParseDuration(*fd.Environment["FRONTDOOR_DRAIN"])
	require.NoError(t, err)
	require.NotNil(t, fd.StopGracePeriod)
	require.Greater(t, time.Duration(*fd.StopGracePeriod), drain, "stop_grace_period above the drain")
}
