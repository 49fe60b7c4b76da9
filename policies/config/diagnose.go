package config

// DiagnoseConfig is the optional diagnosis rung (seed 003 §5.1): when an
// upstream's error body matches no classifier rule, a small model is asked
// to name the failure class from the known set.
type DiagnoseConfig struct {
	Enabled bool `yaml:"enabled"`
	// Model is the ladder rung asked.
	Model string `yaml:"model"`
	// MaxTokens bounds its answer.
	MaxTokens int `yaml:"max_tokens"`
}

func (d DiagnoseConfig) validate(c *Config, bad func(path, format string, args ...any)) {
	if !d.Enabled {
		return
	}
	if _, ok := c.Model(d.Model); !ok {
		bad("diagnose.model", "must name a model of the ladder, got %q", d.Model)
	}
	if d.MaxTokens < 16 || d.MaxTokens > 1024 {
		bad("diagnose.max_tokens", "must be from 16 to 1024 tokens, got %d", d.MaxTokens)
	}
}
