package llmworker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/rules"
	"github.com/durable-llm/durable-llm/workflows"
)

// maxLearnedScenarios bounds the scenarios a worker follows: those its
// policy's rules name, and those of calls that matched a rule without a
// scenario (a caller names any scenario it likes).
const maxLearnedScenarios = 256

// RuleStates is a worker's view of the learners' rule states
// (docs/rules.md "Rules that learn from users"), read by admission through Gate: every refresh it
// queries the learner of each scenario it follows. A scenario without a
// learner (no feedback yet) has every rule on; a learner that cannot be
// read keeps the last states read. Safe for concurrent use.
type RuleStates struct {
	c      client.Client
	every  time.Duration
	logger *slog.Logger

	mu sync.Mutex
	// off are the rules each scenario's learner turned off.
	off map[string][]string
	// follow are the scenario keys to refresh.
	follow []string

	stop context.CancelFunc
	done chan struct{}
}

// NewRuleStates follows the learners of the scenarios cfg's rules name
// (more are followed as calls of other scenarios match rules without one),
// refreshed every cfg.Learn.Refresh once started.
func NewRuleStates(c client.Client, cfg *config.Config, logger *slog.Logger) *RuleStates {
	s := &RuleStates{c: c, every: cfg.Learn.Refresh.D(), logger: logger, off: map[string][]string{}}
	if s.every <= 0 {
		s.every = 5 * time.Second
	}
	for _, r := range cfg.Rules {
		if k := workflows.LearnerScenario(r.Scenario); r.Scenario != "" && !slices.Contains(s.follow, k) {
			s.follow = append(s.follow, k)
		}
	}
	return s
}

// Gate is the rules.Gate of admission: false for a rule the learner of
// scenario's calls turned off.
func (s *RuleStates) Gate(scenario, id string) bool {
	k := workflows.LearnerScenario(scenario)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.follow, k) && len(s.follow) < maxLearnedScenarios {
		s.follow = append(s.follow, k) // read from the next refresh on
	}
	return !slices.Contains(s.off[k], id)
}

var _ rules.Gate = (*RuleStates)(nil).Gate

// Start refreshes the states now and then every refresh, until Stop.
func (s *RuleStates) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			s.Refresh(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the refreshes.
func (s *RuleStates) Stop() {
	if s.stop != nil {
		s.stop()
		<-s.done
		s.stop = nil
	}
}

// Refresh reads every followed learner once.
func (s *RuleStates) Refresh(ctx context.Context) {
	s.mu.Lock()
	follow := slices.Clone(s.follow)
	s.mu.Unlock()
	for _, k := range follow {
		if ctx.Err() != nil {
			return
		}
		off, err := s.read(ctx, k)
		if err != nil {
			s.logger.Warn("cannot read the rules learner; admission keeps its last states", "learner", workflows.LearnerID(k), "error", err)
			continue
		}
		s.mu.Lock()
		if was := s.off[k]; !slices.Equal(was, off) {
			s.logger.Info("rule states changed", "scenario", k, "off", off, "was_off", was)
		}
		if len(off) == 0 {
			delete(s.off, k)
		} else {
			s.off[k] = off
		}
		s.mu.Unlock()
	}
}

// read returns the rules the learner of scenario key has turned off.
func (s *RuleStates) read(ctx context.Context, k string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, min(max(s.every, time.Second), 5*time.Second))
	defer cancel()
	v, err := s.c.QueryWorkflow(ctx, workflows.LearnerID(k), "", workflows.QueryRules)
	var nf *serviceerror.NotFound
	var notReady *serviceerror.WorkflowNotReady
	switch {
	case errors.As(err, &nf):
		return nil, nil // no feedback yet: every rule on
	case errors.As(err, &notReady):
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.off[k], nil // just starting: as before
	case err != nil:
		return nil, err
	}
	var view workflows.RulesView
	if err := v.Get(&view); err != nil {
		return nil, err
	}
	var off []string
	for _, r := range view.Rules {
		if r.State == rules.Off.String() {
			off = append(off, r.ID)
		}
	}
	return off, nil
}
