package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durable-llm/durable-llm/testkit/pgserver"
)

// RequirePostgresEnv, set to 1 (as CI does), turns a missing PostgreSQL
// into a failure instead of a skip.
const RequirePostgresEnv = "DURABLE_LLM_REQUIRE_POSTGRES"

// Postgres is a throwaway PostgreSQL server for tests: its own temporary
// data directory, trust authentication, listening on 127.0.0.1 only.
type Postgres struct {
	*pgserver.Server
	dbs atomic.Int64
}

// StartPostgres starts a server for the tests of a package, or returns a
// reason to skip them (an error when RequirePostgresEnv is set). Stop it
// with Stop.
func StartPostgres() (*Postgres, string, error) {
	s, err := pgserver.Start(pgserver.Options{})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		if os.Getenv(RequirePostgresEnv) == "1" {
			return nil, "", err
		}
		return nil, err.Error(), nil
	}
	if err != nil {
		return nil, "", err
	}
	return &Postgres{Server: s}, "", nil
}

// NewDatabase creates an empty database for one test and returns its URL.
func (p *Postgres) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", p.dbs.Add(1), strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())))
	if len(name) > 60 {
		name = name[:60]
	}
	if err := p.CreateDatabase(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return p.DSN(name)
}

// SharedPostgres is one server for a test binary, started on first use;
// stop it in TestMain.
type SharedPostgres struct {
	once sync.Once
	pg   *Postgres
	skip string
	err  error
}

// Database returns the URL of a new, empty database for t, skipping t
// when PostgreSQL is not installed (failing it under RequirePostgresEnv).
func (s *SharedPostgres) Database(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a PostgreSQL server (not in -short)")
	}
	s.once.Do(func() { s.pg, s.skip, s.err = StartPostgres() })
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.skip != "" {
		t.Skip(s.skip)
	}
	return s.pg.NewDatabase(t)
}

// Stop stops the server, if one started.
func (s *SharedPostgres) Stop() {
	if s.pg != nil {
		s.pg.Stop()
	}
}
