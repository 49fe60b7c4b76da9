package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/store"
)

// usageCmd prints the tokens spent and their estimated cost per tenant
// and model since a time, from the shared store's usage table (README
// "Usage and cost").
func usageCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("usage", flag.ContinueOnError)
	since := fs.Duration("since", 24*time.Hour, "how far back to sum (e.g. 1h, 24h, 168h)")
	policyFile := fs.String("policy", os.Getenv("POLICY_FILE"), "policy YAML file, for the store and the prices (env POLICY_FILE; default: the embedded policy)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usage takes no arguments, got %q", fs.Args())
	}
	if *since <= 0 {
		return fmt.Errorf("--since must be a positive duration such as 24h, got %s", *since)
	}
	cfg, err := config.LoadConfigOrDefault(*policyFile)
	if err != nil {
		return err
	}
	if !cfg.Store.Shared() {
		return errors.New(cfg.Source + ": store.kind is " + cfg.Store.Kind + ": token usage is summed only with store.kind postgres " +
			"(the workers add their counts to its usage table); otherwise read llm_tokens_total from the workers' metrics")
	}
	dsn := os.Getenv(cfg.Store.DSNEnv)
	if dsn == "" {
		return fmt.Errorf("%s is not set: it holds the URL of the store's PostgreSQL (store.dsn_env in %s)", cfg.Store.DSNEnv, cfg.Source)
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	from := time.Now().Add(-*since)
	rows, err := st.Usage(ctx, from)
	if err != nil {
		return err
	}
	printUsage(out, cfg, from, rows)
	return nil
}

type usageLine struct {
	tenant, model                         string
	prompt, completion, failed, duplicate int64
}

// printUsage prints one line per tenant and model and a total. Cost is
// prompt and failed tokens at the model's input price plus completion
// tokens at its output price (failed attempts are mostly prompt);
// duplicate tokens are already in the prompt and failed counts.
func printUsage(out io.Writer, cfg *config.Config, from time.Time, rows []store.Tokens) {
	byKey := map[[2]string]*usageLine{}
	for _, r := range rows {
		k := [2]string{r.Tenant, r.Model}
		l := byKey[k]
		if l == nil {
			l = &usageLine{tenant: r.Tenant, model: r.Model}
			byKey[k] = l
		}
		switch r.Kind {
		case "prompt":
			l.prompt += r.Tokens
		case "completion":
			l.completion += r.Tokens
		case "failed":
			l.failed += r.Tokens
		case "duplicate":
			l.duplicate += r.Tokens
		}
	}
	lines := make([]*usageLine, 0, len(byKey))
	for _, l := range byKey {
		lines = append(lines, l)
	}
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].tenant != lines[j].tenant {
			return lines[i].tenant < lines[j].tenant
		}
		return lines[i].model < lines[j].model
	})
	fmt.Fprintf(out, "token usage since %s (store: PostgreSQL, %s)\n\n", from.UTC().Format(time.RFC3339), cfg.Store.DSNEnv)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenant\tmodel\tprompt\tcompletion\tfailed\tduplicate\test. cost\t")
	var total usageLine
	var totalCost float64
	priced := true
	for _, l := range lines {
		cost, ok := usageCost(cfg, l)
		priced = priced && ok
		totalCost += cost
		total.prompt, total.completion, total.failed, total.duplicate = total.prompt+l.prompt, total.completion+l.completion, total.failed+l.failed, total.duplicate+l.duplicate
		tenant := l.tenant
		if tenant == "" {
			tenant = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t\n", tenant, l.model, l.prompt, l.completion, l.failed, l.duplicate, money(cost, ok))
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t%d\t%s\t\n", total.prompt, total.completion, total.failed, total.duplicate, money(totalCost, priced))
	_ = tw.Flush()
	if len(lines) == 0 {
		fmt.Fprintln(out, "\nno tokens recorded in that time")
	}
	if !priced {
		fmt.Fprintln(out, "\n–: the model has no input_price/output_price in the policy")
	}
}

// usageCost prices a line as the spend caps do (config.Config.TokenCost).
func usageCost(cfg *config.Config, l *usageLine) (float64, bool) {
	in, ok := cfg.TokenCost(l.model, "prompt", l.prompt+l.failed)
	out, _ := cfg.TokenCost(l.model, "completion", l.completion)
	return in + out, ok
}

func money(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("$%.4f", v)
}
