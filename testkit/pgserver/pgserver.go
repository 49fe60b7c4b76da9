// Package pgserver runs a PostgreSQL server of its own from Debian's
// packages (or any initdb/pg_ctl on PATH): for the tests' throwaway
// databases and for `make cluster`, whose data directory survives
// restarts. It listens on 127.0.0.1 only, with trust authentication.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned (wrapped) by Start when PostgreSQL's
// programs are missing or cannot run on this machine.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (Debian: apt-get install postgresql)")

// Options of Start.
type Options struct {
	// Dir is the data directory, created by initdb when empty or absent
	// and reused when it holds a cluster. Empty: a temporary directory,
	// removed by Stop.
	Dir string
	// Port to listen on (127.0.0.1). Zero: a free port.
	Port int
}

// Server is a running PostgreSQL server.
type Server struct {
	dir   string
	temp  string // the temporary directory to remove at Stop
	port  int
	pgCtl string
	// asUser prefixes the programs with runuser when running as root:
	// PostgreSQL refuses to run as root.
	asUser []string
}

// bin finds a PostgreSQL server program: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin.
func bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("%w: %s not found", ErrNotInstalled, name)
	}
	return matches[len(matches)-1], nil
}

// Start starts a server (initialising its data directory first when it
// has none) and waits until it accepts connections.
func Start(o Options) (*Server, error) {
	initdb, err := bin("initdb")
	if err != nil {
		return nil, err
	}
	pgCtl, err := bin("pg_ctl")
	if err != nil {
		return nil, err
	}
	s := &Server{pgCtl: pgCtl, dir: o.Dir, port: o.Port}
	if s.dir == "" {
		if s.temp, err = os.MkdirTemp("", "durable-llm-pg-"); err != nil {
			return nil, err
		}
		s.dir = filepath.Join(s.temp, "data")
	}
	if s.dir, err = filepath.Abs(s.dir); err != nil {
		return nil, err
	}
	var uid, gid int
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run it as: %v", ErrNotInstalled, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		s.asUser = []string{"runuser", "-u", "postgres", "--"}
		if s.temp != "" {
			// The postgres user must reach the data directory. (A
			// directory of the caller's must already be reachable:
			// initdb says so when it is not.)
			if err := os.Chmod(s.temp, 0o755); err != nil {
				return nil, err
			}
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, "PG_VERSION")); err != nil {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, err
		}
		if s.asUser != nil {
			if err := os.Chown(s.dir, uid, gid); err != nil {
				return nil, err
			}
		}
		if out, err := s.run(initdb, "-D", s.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
			return nil, fmt.Errorf("initdb %s: %v: %s", s.dir, err, out)
		}
	}
	if s.port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s.port = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=300", s.port)
	if s.temp != "" {
		opts += " -c fsync=off" // a throwaway server: speed over durability
	}
	if out, err := s.run(pgCtl, "-D", s.dir, "-o", opts, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		return nil, fmt.Errorf("pg_ctl start (log: %s): %v: %s", filepath.Join(s.dir, "server.log"), err, out)
	}
	return s, nil
}

func (s *Server) run(prog string, args ...string) ([]byte, error) {
	argv := append(append([]string{}, s.asUser...), append([]string{prog}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

// Stop stops the server at once (PostgreSQL's immediate mode: a
// persistent data directory recovers at the next start) and removes a
// temporary data directory.
func (s *Server) Stop() {
	_, _ = s.run(s.pgCtl, "-D", s.dir, "-m", "immediate", "-w", "stop")
	if s.temp != "" {
		_ = os.RemoveAll(s.temp)
	}
}

// DSN is the URL of database db on the server, as user postgres.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// CreateDatabase creates database name unless it exists.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
