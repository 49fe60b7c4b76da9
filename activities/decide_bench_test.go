package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/policies/prompt"
	"github.com/durable-llm/durable-llm/policies/request"
)

// conversation builds a multi-round support conversation in English and
// Chinese of about tokens prompt tokens (cl100k_base).
func conversation(tb testing.TB, tc *prompt.TokenCounter, tokens int) []request.Message {
	tb.Helper()
	msgs := []request.Message{{Role: request.RoleSystem, Content: "You are a patient customer-service agent for an online shop. Answer briefly and politely."}}
	user := []string{
		"My order %d has not arrived yet, it was supposed to come on Monday. Can you check where it is?",
		"我的订单 %d 还没有到，物流信息三天没有更新了，请帮我查一下。",
		"I would like to return item %d, the size is wrong. How do I print the return label?",
	}
	answer := []string{
		"I checked order %d: it left our warehouse yesterday and the carrier expects to deliver it within two working days. You will get a tracking e-mail as soon as it is scanned again.",
		"订单 %d 已经从仓库发出，预计两个工作日内送达。如果明天物流信息仍未更新，我们会为您联系快递公司并补发。",
		"For item %d, open Orders → Returns, choose the item and the reason, and print the label we e-mail you. Drop the parcel at any post office within 30 days.",
	}
	detail := "Our records show the parcel was handed to the carrier at 14:05 and scanned at the sorting centre at 21:40; " +
		"the next scan is expected at the local depot. 包裹已于昨日交给承运商，今晚在分拣中心扫描，下一站是本地网点。 "
	n := tc.Count(msgs[0].Content)
	for i := 0; n < tokens; i++ {
		u := request.Message{Role: request.RoleUser, Content: fmt.Sprintf(user[i%3], 1000+i)}
		a := request.Message{Role: request.RoleAssistant, Content: fmt.Sprintf(answer[i%3], 1000+i) + " " +
			strings.Repeat(detail, 1+i%3) + strings.Repeat("Thank you for your patience. ", i%4)}
		msgs = append(msgs, u, a)
		n += tc.Count(u.Content) + tc.Count(a.Content) + 8
	}
	return append(msgs, request.Message{Role: request.RoleUser, Content: "And what about my last order, when does it arrive?"})
}

// BenchmarkDecisionPath measures what the worker decides around one
// upstream attempt, without the HTTP call: PrepareAttempt (choose the
// model, cut and count the prompt) and DecideNext after a timeout (guards'
// verdicts and callstate.Next), for a call's first attempt, nothing cached.
func BenchmarkDecisionPath(b *testing.B) {
	cfg := config.DefaultConfig()
	cfg.Budget.Floor = 1 << 30 // the budget never decides here
	a, err := New(Options{Config: cfg, Rand: func() float64 { return 0.5 }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, size := range []int{1_000, 10_000, 100_000} {
		req := request.Request{Messages: conversation(b, a.tokens, size)}
		exact := a.tokens.CountMessages(req.Messages)
		b.Run(fmt.Sprintf("%dk-tokens", size/1000), func(b *testing.B) {
			ad, err := a.Admit(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var sent int
			for b.Loop() {
				p, err := a.PrepareAttempt(ctx, PrepareInput{Request: req, State: ad.State})
				if err != nil || p.Model == "" {
					b.Fatalf("prepare: %v %q", err, p.Reason)
				}
				step, err := a.DecideNext(ctx, DecideInput{State: p.State, Outcome: callstate.Outcome{Class: failure.Timeout, Elapsed: time.Second}})
				if err != nil || step.Kind != callstate.Retry {
					b.Fatalf("decide: %v %s %s", err, step.Kind, step.Reason)
				}
				sent = p.Prompt.Tokens
			}
			b.ReportMetric(float64(exact), "prompt-tokens")
			b.ReportMetric(float64(sent), "sent-tokens")
		})
	}
}

// BenchmarkFingerprint compares, side by side in one run, the billing
// fingerprint (messages hashed field by field) with the JSON encoding it
// replaced, on the decision path's 1 k-token conversation.
func BenchmarkFingerprint(b *testing.B) {
	a, err := New(Options{Config: config.DefaultConfig()})
	if err != nil {
		b.Fatal(err)
	}
	r := request.Request{Tenant: "acme", UserID: "u1", SessionID: "s1", Messages: conversation(b, a.tokens, 1_000)}
	sh := callstate.Shape{MaxTokens: 512}
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = fingerprint(r, "qwen-72b", r.Messages, sh)
		}
	})
	b.Run("json-baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			params := r
			params.Messages = nil
			j, _ := json.Marshal([]any{r.Tenant, r.UserID, r.SessionID, "qwen-72b", r.Messages, sh.MaxTokens, sh.Temperature, params})
			sum := sha256.Sum256(j)
			_ = hex.EncodeToString(sum[:])
		}
	})
}
