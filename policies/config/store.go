package config

// StoreConfig says where the state that several workers share beyond
// Temporal is kept (docs/how-it-works.md "Shared store and usage"): the answer cache and the token
// usage `starter usage` sums.
type StoreConfig struct {
	// Kind is StoreMemory (each worker its own cache; usage only in the
	// metrics) or StorePostgres (shared by every worker).
	Kind string `yaml:"kind"`
	// DSNEnv names the environment variable that holds the PostgreSQL URL
	// (postgres://user:password@host:5432/db); the URL, which carries a
	// password, never sits in the policy file.
	DSNEnv string `yaml:"dsn_env"`
	// UsageFlush is how often a worker adds the tokens it counted to the
	// usage table (a worker killed loses at most that much of the count).
	UsageFlush Duration `yaml:"usage_flush"`
}

// The kinds of StoreConfig.Kind.
const (
	StoreMemory   = "memory"
	StorePostgres = "postgres"
)

// Shared reports whether the store is shared by the workers.
func (s StoreConfig) Shared() bool { return s.Kind == StorePostgres }

func (s StoreConfig) validate(bad func(path, format string, args ...any)) {
	switch s.Kind {
	case StoreMemory:
	case StorePostgres:
		if !envNameRE.MatchString(s.DSNEnv) {
			// Not echoed: it may be the URL itself, password and all.
			bad("store.dsn_env", "must be the NAME of the environment variable that holds the PostgreSQL URL (such as LLM_STORE_DSN), not the URL, got a %d-character value (not shown)", len(s.DSNEnv))
		}
		if s.UsageFlush <= 0 {
			bad("store.usage_flush", "must be a positive duration such as \"10s\", got %s", s.UsageFlush)
		}
	default:
		bad("store.kind", "must be %q or %q, got %q", StoreMemory, StorePostgres, s.Kind)
	}
}
