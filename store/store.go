// Package store is the state several workers share beyond Temporal: the
// answer cache (docs/how-it-works.md "Answer cache") and the token usage that `starter
// usage` sums (docs/how-it-works.md "Shared store and usage"), in PostgreSQL — the database the
// deployment already runs for Temporal, as a database of its own. The
// policy selects it (store.kind: postgres); the connection URL comes from
// the environment variable store.dsn_env and never from the policy file.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the shared store. Safe for concurrent use.
type Postgres struct {
	pool *pgxpool.Pool
}

// schema creates the tables once. Every statement is idempotent, but
// PostgreSQL's IF NOT EXISTS is not safe against a concurrent creation of
// the same table (a unique violation in its catalogue): workers starting
// together take schemaLock in turn.
const schema = `
CREATE TABLE IF NOT EXISTS llm_answer_cache (
	key        text PRIMARY KEY,
	tenant     text NOT NULL,
	model      text NOT NULL,
	content    text NOT NULL,
	stored_at  timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_answer_cache_stored_at ON llm_answer_cache (stored_at);
CREATE TABLE IF NOT EXISTS llm_usage (
	minute timestamptz NOT NULL,
	tenant text NOT NULL,
	model  text NOT NULL,
	kind   text NOT NULL,
	tokens bigint NOT NULL,
	PRIMARY KEY (minute, tenant, model, kind)
);
`

// Open connects to the PostgreSQL at dsn and creates the tables it lacks.
// Errors name the server (never the password).
func Open(ctx context.Context, dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: the PostgreSQL URL does not parse (want postgres://user:password@host:5432/db): %v", redact(err))
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %v", where(cfg), redact(err))
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = pgx.BeginFunc(cctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(cctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
			return err
		}
		_, err := tx.Exec(cctx, schema)
		return err
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: PostgreSQL at %s: %v", where(cfg), redact(err))
	}
	return &Postgres{pool: pool}, nil
}

// Close closes the connections.
func (p *Postgres) Close() { p.pool.Close() }

func where(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%s:%d/%s (user %s)", c.Host, c.Port, c.Database, c.User)
}

// redact drops a connection URL an error may quote.
func redact(err error) string {
	s := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return s
}

// Answer is a cached answer.
type Answer struct {
	Content string
	Model   string
	At      time.Time
}

// hashKey keeps the table's keys short and free of prompt text.
func hashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// GetAnswer returns the answer kept under key, when it has not expired at now.
func (p *Postgres) GetAnswer(ctx context.Context, key string, now time.Time) (Answer, bool, error) {
	var a Answer
	err := p.pool.QueryRow(ctx,
		`SELECT content, model, stored_at FROM llm_answer_cache WHERE key = $1 AND expires_at > $2`,
		hashKey(key), now).Scan(&a.Content, &a.Model, &a.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return Answer{}, false, nil
	}
	if err != nil {
		return Answer{}, false, fmt.Errorf("store: read the answer cache: %w", err)
	}
	return a, true, nil
}

// PutAnswer keeps a under key for ttl, replacing what the key held.
func (p *Postgres) PutAnswer(ctx context.Context, key, tenant string, a Answer, ttl time.Duration) error {
	_, err := p.pool.Exec(ctx, `
INSERT INTO llm_answer_cache (key, tenant, model, content, stored_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (key) DO UPDATE SET tenant = excluded.tenant, model = excluded.model, content = excluded.content,
	stored_at = excluded.stored_at, expires_at = excluded.expires_at`,
		hashKey(key), tenant, a.Model, a.Content, a.At, a.At.Add(ttl))
	if err != nil {
		return fmt.Errorf("store: write the answer cache: %w", err)
	}
	return nil
}

// schemaLock is the advisory lock held while the tables are created.
const schemaLock = 0x6c6c6d5f736368 // "llm_sch"

// trimLock is the advisory lock one trim holds: workers trimming at the
// same moment would delete the same rows in different orders and
// deadlock; the one that does not get the lock skips its trim.
const trimLock = 0x6c6c6d5f74726d // "llm_trm"

// TrimAnswers deletes the expired answers and, beyond max, the oldest,
// unless another worker is trimming right now.
func (p *Postgres) TrimAnswers(ctx context.Context, now time.Time, max int) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(trimLock)).Scan(&locked); err != nil || !locked {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM llm_answer_cache WHERE expires_at <= $1`, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
DELETE FROM llm_answer_cache WHERE key IN (
	SELECT key FROM llm_answer_cache ORDER BY stored_at DESC OFFSET $1)`, max)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: trim the answer cache: %w", err)
	}
	return nil
}

// CountAnswers is the number of answers kept.
func (p *Postgres) CountAnswers(ctx context.Context) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM llm_answer_cache`).Scan(&n)
	return n, err
}

// Tokens is a number of tokens of one kind (prompt, completion, failed,
// duplicate: the kinds of llm_tokens_total) spent by a tenant on a model.
type Tokens struct {
	Tenant string
	Model  string
	Kind   string
	Tokens int64
}

// AddUsage adds rows counted in the minute that starts at minute.
func (p *Postgres) AddUsage(ctx context.Context, minute time.Time, rows []Tokens) error {
	if len(rows) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, r := range rows {
		b.Queue(`
INSERT INTO llm_usage (minute, tenant, model, kind, tokens) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (minute, tenant, model, kind) DO UPDATE SET tokens = llm_usage.tokens + excluded.tokens`,
			minute.UTC().Truncate(time.Minute), r.Tenant, r.Model, r.Kind, r.Tokens)
	}
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store: write usage: %w", err)
	}
	return nil
}

// Usage sums the tokens counted from since on, by tenant, model and kind.
func (p *Postgres) Usage(ctx context.Context, since time.Time) ([]Tokens, error) {
	rows, err := p.pool.Query(ctx, `
SELECT tenant, model, kind, sum(tokens) FROM llm_usage WHERE minute >= $1
GROUP BY tenant, model, kind ORDER BY tenant, model, kind`, since.UTC().Truncate(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("store: read usage: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tokens, error) {
		var t Tokens
		err := r.Scan(&t.Tenant, &t.Model, &t.Kind, &t.Tokens)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read usage: %w", err)
	}
	return out, nil
}
