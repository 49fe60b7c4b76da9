package llmworker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/activities"
	"github.com/durable-llm/durable-llm/policies/config"
)

// EndpointModels is what one endpoint of the ladder said when asked for
// its models (GET /v1/models).
type EndpointModels struct {
	// BaseURL of the endpoint (a deployment's, for a model with several),
	// with any user, password or query removed.
	BaseURL string
	// KeyEnv is the variable of the key it was asked with ("" for none).
	KeyEnv string
	// Want are the ladder's models served there.
	Want []string
	// Offered is the endpoint's list; Missing the wanted models not in it.
	Offered []string
	Missing []string
	// Err is why the endpoint could not be asked or did not list its
	// models (unreachable, refused, not implemented).
	Err error
	// Simulator: every model it listed is owned by llmsim (the project's
	// simulator says so in /v1/models).
	Simulator bool
	// Anthropic: asked on Anthropic's wire, whose list names dated ids
	// (claude-…-20251101) and not the aliases a policy may name, so a
	// model missing from it is only a warning.
	Anthropic bool
}

// Listed reports whether the endpoint answered with a list of models.
func (e EndpointModels) Listed() bool { return e.Err == nil && len(e.Offered) > 0 }

// AskModels asks every endpoint of the ladder (each base URL and key
// once, all at once) for the models it offers, with the keys read by
// getenv; each answer within timeout.
func AskModels(ctx context.Context, cfg *config.Config, getenv func(string) string, timeout time.Duration) []EndpointModels {
	type target struct {
		base, keyEnv string
		anthropic    bool
	}
	var order []target
	want := map[target][]string{}
	for _, m := range cfg.Models {
		for _, k := range m.Keys() {
			mk := m.WithKey(k)
			t := target{base: mk.BaseURL, keyEnv: mk.APIKeyEnv}
			if mk.Wire() == config.APIAnthropic {
				// Anthropic's list is GET /v1/models from the server's root.
				t.base, t.anthropic = strings.TrimRight(mk.BaseURL, "/")+"/v1", true
			}
			if _, ok := want[t]; !ok {
				order = append(order, t)
			}
			if !slices.Contains(want[t], m.Name) {
				want[t] = append(want[t], m.Name)
			}
		}
	}
	hc := &http.Client{Timeout: timeout}
	out := make([]EndpointModels, len(order))
	var wg sync.WaitGroup
	for i, t := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := hc
			if t.anthropic {
				c = &http.Client{Timeout: timeout, Transport: anthropicVersion{}}
			}
			out[i] = askEndpoint(ctx, c, t.base, t.keyEnv, want[t], getenv)
			out[i].Anthropic = t.anthropic
		}()
	}
	wg.Wait()
	return out
}

func askEndpoint(ctx context.Context, hc *http.Client, base, keyEnv string, want []string, getenv func(string) string) EndpointModels {
	e := EndpointModels{BaseURL: config.RedactURL(base), KeyEnv: keyEnv, Want: want}
	key := ""
	if keyEnv != "" {
		key = getenv(keyEnv)
	}
	oc := openai.DefaultConfig(key)
	oc.BaseURL, oc.HTTPClient = base, hc
	list, err := openai.NewClientWithConfig(oc).ListModels(ctx)
	if err != nil {
		e.Err = listError(err, key)
		return e
	}
	e.Simulator = len(list.Models) > 0
	for _, m := range list.Models {
		e.Offered = append(e.Offered, m.ID)
		e.Simulator = e.Simulator && m.OwnedBy == llmsimOwner
	}
	slices.Sort(e.Offered)
	for _, w := range e.Want {
		if !Offers(e.Offered, w) {
			e.Missing = append(e.Missing, w)
		}
	}
	return e
}

// anthropicVersion sends the anthropic-version header Anthropic's API
// requires on every request, its model list included.
type anthropicVersion struct{}

func (anthropicVersion) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("anthropic-version", "2023-06-01")
	return http.DefaultTransport.RoundTrip(r)
}

// Offers reports whether a list of models offers name: it holds name, or
// name has no tag and the list holds name:latest (Ollama lists "tiny" as
// "tiny:latest" and serves it under both names).
func Offers(offered []string, name string) bool {
	if slices.Contains(offered, name) {
		return true
	}
	return !strings.Contains(name, ":") && slices.Contains(offered, name+":latest")
}

// listError words why an endpoint gave no list, without the URL's secrets.
func listError(err error, key string) error {
	var api *openai.APIError
	var req *openai.RequestError
	var ue *url.Error
	switch {
	case errors.As(err, &api):
		// A gateway may quote the key it refused.
		return fmt.Errorf("HTTP %d: %s", api.HTTPStatusCode, activities.RedactKey(api.Message, key))
	case errors.As(err, &req):
		return fmt.Errorf("HTTP %d", req.HTTPStatusCode)
	case errors.As(err, &ue):
		return ue.Err
	}
	return err
}

// CheckModels is the worker's start-up check: an error naming each
// ladder model that an endpoint's list of models does not hold, with the
// models it does offer (unless lenient, when that is only a warning). An
// endpoint that lists nothing (unreachable, no /v1/models, an error, an
// empty list) is a warning: a provider down or a server starting after
// the worker must not keep workers from serving the calls' fallbacks.
func CheckModels(ends []EndpointModels, lenient bool) (warnings []string, err error) {
	var problems []string
	for _, e := range ends {
		switch {
		case !e.Listed():
			// Checked first: an empty list lacks every model without
			// saying anything of them.
			warnings = append(warnings, fmt.Sprintf("%s lists no models (%v): %s not checked", e.BaseURL, orEmpty(e.Err), strings.Join(e.Want, ", ")))
		case len(e.Missing) > 0:
			msg := fmt.Sprintf("%s does not offer %s (it offers: %s)", e.BaseURL, strings.Join(e.Missing, ", "), strings.Join(e.Offered, ", "))
			if lenient || e.Anthropic {
				warnings = append(warnings, msg)
			} else {
				problems = append(problems, msg)
			}
		}
	}
	if len(problems) > 0 {
		return warnings, errors.New(strings.Join(problems, "; "))
	}
	return warnings, nil
}

func orEmpty(err error) string {
	if err == nil {
		return "an empty list"
	}
	return err.Error()
}

// llmsimOwner is the owned_by of the models llmsim lists.
const llmsimOwner = "llmsim"

// ExampleFAQ decides whether a worker whose policy names no faq.file may
// answer from the embedded example FAQ, whose shop, hours and policies are
// made up: only when every endpoint of the ladder (ends, as AskModels
// asked them) is the simulator. Otherwise it says why not: the first
// endpoint that is, or may be, a real server, so that the worker turns the
// FAQ off rather than answer real users with invented policies.
func ExampleFAQ(ends []EndpointModels) (keep bool, why string) {
	for _, e := range ends {
		switch {
		case e.Simulator:
			continue
		case e.Listed():
			return false, fmt.Sprintf("%s (%s) is not the simulator", e.BaseURL, strings.Join(e.Want, ", "))
		default:
			return false, fmt.Sprintf("%s (%s) did not say it is the simulator: %v", e.BaseURL, strings.Join(e.Want, ", "), orEmpty(e.Err))
		}
	}
	return len(ends) > 0, "every model goes to the simulator"
}
