package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequirePostgresEnv, set to 1 (as CI does), turns a missing PostgreSQL
// into a failure instead of a skip.
const RequirePostgresEnv = "DURABLE_LLM_REQUIRE_POSTGRES"

// Postgres is a throwaway PostgreSQL server for tests: its own data
// directory, trust authentication, listening on 127.0.0.1 only.
type Postgres struct {
	dir, port, pgCtl string
	asUser           []string // runuser prefix when running as root
	dbs              atomic.Int64
}

// pgBin finds a PostgreSQL server program: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin.
func pgBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("PostgreSQL's %s is not installed (Debian: apt-get install postgresql)", name)
	}
	return matches[len(matches)-1], nil
}

// StartPostgres starts a server for the tests of m, or returns a reason
// to skip them (an error when RequirePostgresEnv is set). Stop it with
// Stop.
func StartPostgres() (*Postgres, string, error) {
	initdb, err := pgBin("initdb")
	if err != nil {
		return missing(err)
	}
	pgCtl, err := pgBin("pg_ctl")
	if err != nil {
		return missing(err)
	}
	p := &Postgres{pgCtl: pgCtl}
	base, err := os.MkdirTemp("", "durable-llm-pg-")
	if err != nil {
		return nil, "", err
	}
	p.dir = filepath.Join(base, "data")
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: its own user runs it.
		u, err := user.Lookup("postgres")
		if err != nil {
			return missing(fmt.Errorf("running as root and there is no postgres user to run PostgreSQL as: %v", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(base, 0o755); err != nil {
			return nil, "", err
		}
		if err := os.Mkdir(p.dir, 0o700); err != nil {
			return nil, "", err
		}
		if err := os.Chown(p.dir, uid, gid); err != nil {
			return nil, "", err
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	p.port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	if out, err := p.run(initdb, "-D", p.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
		return nil, "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := "-p " + p.port + " -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off"
	if out, err := p.run(pgCtl, "-D", p.dir, "-o", opts, "-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		return nil, "", fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	return p, "", nil
}

func missing(err error) (*Postgres, string, error) {
	if os.Getenv(RequirePostgresEnv) == "1" {
		return nil, "", err
	}
	return nil, err.Error(), nil
}

func (p *Postgres) run(prog string, args ...string) ([]byte, error) {
	argv := append(append([]string{}, p.asUser...), append([]string{prog}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

// Stop stops the server and removes its data.
func (p *Postgres) Stop() {
	_, _ = p.run(p.pgCtl, "-D", p.dir, "-m", "immediate", "-w", "stop")
	_ = os.RemoveAll(filepath.Dir(p.dir))
}

// DSN is the URL of database db on the server.
func (p *Postgres) DSN(db string) string {
	return "postgres://postgres@127.0.0.1:" + p.port + "/" + db + "?sslmode=disable"
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
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
