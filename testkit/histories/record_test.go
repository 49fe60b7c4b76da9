package histories

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/replay"
	"github.com/durable-llm/durable-llm/testkit/testenv"
)

func TestPathsAreUniqueAndDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range paths() {
		require.False(t, seen[p.name], "path %s twice", p.name)
		seen[p.name] = true
		require.NotEmpty(t, p.doc, p.name)
		require.Equal(t, "history-"+p.name, p.request.IdempotencyKey, "the workflow ID names the path")
		if p.want.fails == "" {
			require.NotEmpty(t, p.want.source, "%s: a call that answers says who answered", p.name)
		}
	}
	_, err := selectPaths(paths(), []string{"success", "no-such-path"})
	require.ErrorContains(t, err, `no path "no-such-path"`)
}

func TestStaleListsFilesNoPathRecords(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"success.json", "renamed-path.json", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o600))
	}
	stale, err := Stale(dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "renamed-path.json")}, stale)
}

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// TestRecordSavesCheckedHistories records a few paths for real and replays
// what it saved.
func TestRecordSavesCheckedHistories(t *testing.T) {
	srv := shared.Server(t)
	dir := t.TempDir()
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	names := []string{"success", "class-rate_limited", "handoff", "invalid-request"}
	require.NoError(t, Record(ctx, Options{Dir: dir, Only: names, Log: &log, HostPort: srv.FrontendHostPort()}))
	t.Log(log.String())
	var files []string
	for _, n := range names {
		files = append(files, filepath.Join(dir, n+".json"))
	}
	c, err := replay.New(replay.Options{})
	require.NoError(t, err)
	n, err := c.Files(files)
	require.NoError(t, err)
	require.Equal(t, len(names), n)

	h, err := replay.LoadFile(files[1])
	require.NoError(t, err)
	require.Equal(t, "history-class-rate_limited", replay.WorkflowID(h, nil))
	data, err := os.ReadFile(files[1])
	require.NoError(t, err)
	// The worker's identity, with the print of the settings every process
	// shares (llmworker.SettingsPrint) after it.
	require.Contains(t, string(data), `"identity": "`+workerIdentity+` durable-llm[ladder=`)
	host, err := os.Hostname()
	require.NoError(t, err)
	require.NotContains(t, string(data), "@"+host, "no default pid@host identity")
}

// TestRecordRefusesARunThatTookAnotherPath: a path whose run does not show
// what it claims fails the recording and leaves the old file alone.
func TestRecordRefusesARunThatTookAnotherPath(t *testing.T) {
	srv := shared.Server(t)
	dir := t.TempDir()
	old := filepath.Join(dir, "class-timeout.json")
	require.NoError(t, os.WriteFile(old, []byte("the previous recording"), 0o600))
	i := slices.IndexFunc(paths(), func(p path) bool { return p.name == "class-timeout" })
	wrong := paths()[i]
	wrong.request = ask("class-timeout", plainQuestion) // no fault: answers at once
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Record(ctx, Options{Dir: dir, HostPort: srv.FrontendHostPort(), paths: []path{wrong}})
	require.ErrorContains(t, err, "path class-timeout: the run did not take the path")
	require.ErrorContains(t, err, "attempts [qwen-72b:ok:answer], want [qwen-72b:timeout:prune+retry qwen-72b:ok:answer]")
	data, err := os.ReadFile(old)
	require.NoError(t, err)
	require.Equal(t, "the previous recording", string(data))
	left, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.Equal(t, []string{old}, left)
}

func TestRecordSkipsTheKilledWorkerPathWithoutAChildCommand(t *testing.T) {
	srv := shared.Server(t)
	var log bytes.Buffer
	err := Record(context.Background(), Options{Dir: t.TempDir(), Only: []string{"class-worker_lost"}, Log: &log, HostPort: srv.FrontendHostPort()})
	require.NoError(t, err)
	require.Contains(t, log.String(), "skip   class-worker_lost")
}
