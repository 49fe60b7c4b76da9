package llmworker

import (
	"context"
	"log/slog"
	"time"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/faq"
)

// exampleFAQ is what Start needs to decide whether a worker whose policy
// names no faq.file may answer from the embedded example FAQ, whose
// shop, hours and policies are made up.
type exampleFAQ struct {
	cfg    *config.Config
	getenv func(string) string
	ends   []EndpointModels
}

// holdExampleFAQ turns acts' FAQ off when cfg names no faq.file, until
// decide turns the example FAQ on: New does no network I/O, and a worker
// started without Start (its SDK worker's own) answers no user from the
// made-up shop. It returns nil when cfg names a faq.file (or off).
func holdExampleFAQ(acts *activities.Activities, cfg *config.Config, getenv func(string) string, ends []EndpointModels) *exampleFAQ {
	if !cfg.FAQ.Example() {
		return nil
	}
	activities.SetFAQ(acts, nil)
	return &exampleFAQ{cfg: cfg, getenv: getenv, ends: ends}
}

// decide turns acts' example FAQ on only when every endpoint of the
// ladder says it is the simulator (ExampleFAQ), asking them unless the
// caller already did (Options.Endpoints); otherwise the FAQ stays off and
// a failed call gets a rule's card or the placeholder. It says which.
func (e *exampleFAQ) decide(acts *activities.Activities, log *slog.Logger) {
	ends := e.ends
	if ends == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends = AskModels(ctx, e.cfg, e.getenv, 5*time.Second)
		cancel()
	}
	if keep, why := ExampleFAQ(ends); !keep {
		log.Warn("FAQ off: the example FAQ's shop is made up and answers only the simulator; set faq.file to your own FAQ",
			"why", why, "fallback", "a rule's card, else the placeholder")
		return
	}
	activities.SetFAQ(acts, faq.DefaultFAQ())
	log.Info("FAQ: the example FAQ (every model goes to the simulator); set faq.file to your own")
}
