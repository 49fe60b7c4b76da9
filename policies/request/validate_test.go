package request

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/config"
)

// validateCfg has explicit limits, smaller than the defaults where that
// makes the tests cheaper.
var validateCfg = &config.Config{
	Models: []config.ModelConfig{{Name: "qwen-72b"}, {Name: "qwen-14b"}},
	Limits: config.LimitsConfig{MaxPromptBytes: 1000, MaxMessages: 5, MaxTokens: 4096, MaxTemperature: 1.5},
	Call:   config.CallConfig{MaxDeadline: config.Duration(2 * time.Minute)},
}

func ptr[T any](v T) *T { return &v }

func validRequest() Request {
	return Request{
		UserID: "u-42", SessionID: "s-7", Scenario: "customer_service",
		Messages: []Message{
			{Role: RoleSystem, Content: "You are a support agent."},
			{Role: RoleUser, Content: "Where is my order?"},
		},
		MaxTokens: 512, Temperature: ptr(0.7), DeadlineMS: 60000,
	}
}

func TestValidateRequestAccepts(t *testing.T) {
	tests := []struct {
		name string
		cfg  *config.Config
		edit func(r *Request)
	}{
		{"typical", validateCfg, func(r *Request) {}},
		{"all optional fields zero", validateCfg, func(r *Request) {
			r.Model, r.MaxTokens, r.Temperature, r.DeadlineMS = "", 0, nil, 0
		}},
		{"known model", validateCfg, func(r *Request) { r.Model = "qwen-14b" }},
		{"limits inclusive", validateCfg, func(r *Request) {
			r.MaxTokens, r.Temperature, r.DeadlineMS = 4096, ptr(1.5), 120000
		}},
		{"temperature 0", validateCfg, func(r *Request) { r.Temperature = ptr(0.0) }},
		{"minimum deadline", validateCfg, func(r *Request) { r.DeadlineMS = 1000 }},
		{"tool round", validateCfg, func(r *Request) {
			r.Messages = []Message{
				{Role: RoleUser, Content: "weather?"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "weather", Arguments: "{}"}}}},
				{Role: RoleTool, ToolCallID: "c1", Content: "sunny"},
				{Role: RoleAssistant, Content: "Sunny."},
				{Role: RoleUser, Content: "and tomorrow?"},
			}
		}},
		{"developer role and chinese", validateCfg, func(r *Request) {
			r.Messages = []Message{{Role: RoleDeveloper, Content: "简短回答"}, {Role: RoleUser, Content: "我的订单到哪了？"}}
		}},
		{"valid idempotency key", validateCfg, func(r *Request) { r.IdempotencyKey = "order-123:attempt" }},
		{"nil config: defaults, any model", nil, func(r *Request) {
			r.Model, r.MaxTokens, r.Temperature, r.DeadlineMS = "anything", 32768, ptr(2.0), 600000
		}},
		{"zero limits mean defaults", &config.Config{}, func(r *Request) {
			r.MaxTokens, r.DeadlineMS = 32768, 600000
			r.Messages[1].Content = strings.Repeat("x", 1<<19)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRequest()
			tt.edit(&r)
			if err := Validate(r, tt.cfg); err != nil {
				t.Errorf("Validate = %v, want nil", err)
			}
		})
	}
}

func TestValidateRequestRefuses(t *testing.T) {
	tests := []struct {
		name      string
		cfg       *config.Config
		edit      func(r *Request)
		wantField string
		wantText  string // part of the problem
	}{
		{"no messages", validateCfg, func(r *Request) { r.Messages = nil }, "messages", "empty"},
		{"too many messages", validateCfg, func(r *Request) {
			for range 5 {
				r.Messages = append([]Message{{Role: RoleUser, Content: "hi"}}, r.Messages...)
			}
		}, "messages", "7 messages, over the limit of 5"},
		{"last message from the assistant", validateCfg, func(r *Request) {
			r.Messages = append(r.Messages, Message{Role: RoleAssistant, Content: "It shipped."})
		}, "messages[2].role", `the last message is from "assistant" (want user`},
		{"last message only a system prompt", validateCfg, func(r *Request) {
			r.Messages = r.Messages[:1]
		}, "messages[0].role", `is from "system"`},
		{"blank question", validateCfg, func(r *Request) { r.Messages[1].Content = " \n " }, "messages[1].content", "empty"},
		{"unknown role", validateCfg, func(r *Request) {
			r.Messages = []Message{{Role: RoleUser, Content: "a"}, {Role: RoleAssistant, Content: "b"}, {Role: "robot", Content: "c"}, {Role: RoleUser, Content: "d"}}
		}, "messages[2].role", `unknown role "robot" (want system, developer, user, assistant or tool)`},
		{"role is case-sensitive", validateCfg, func(r *Request) { r.Messages[0].Role = "System" }, "messages[0].role", `unknown role "System"`},
		{"missing role", validateCfg, func(r *Request) { r.Messages[0].Role = "" }, "messages[0].role", "missing"},
		{"tool message without tool_call_id", validateCfg, func(r *Request) {
			r.Messages = []Message{{Role: RoleUser, Content: "q"}, {Role: RoleTool, Content: "result"}, {Role: RoleUser, Content: "q2"}}
		}, "messages[1].tool_call_id", "missing on a tool message"},
		{"tool message answering nothing", validateCfg, func(r *Request) {
			r.Messages = []Message{{Role: RoleUser, Content: "q"}, {Role: RoleTool, ToolCallID: "c9", Content: "result"}, {Role: RoleUser, Content: "q2"}}
		}, "messages[1].tool_call_id", `"c9" answers no tool call`},
		{"tool call without id", validateCfg, func(r *Request) {
			r.Messages = []Message{{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f"}}}}, {Role: RoleUser, Content: "q2"}}
		}, "messages[1].tool_calls[0].id", "missing"},
		{"tool call without function name", validateCfg, func(r *Request) {
			r.Messages = []Message{{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1"}}}, {Role: RoleUser, Content: "q2"}}
		}, "messages[1].tool_calls[0].function.name", "missing"},
		{"tool calls on a user message", validateCfg, func(r *Request) {
			r.Messages[1].ToolCalls = []ToolCall{{ID: "c1", Function: FunctionCall{Name: "f"}}}
		}, "messages[1].tool_calls", `on a "user" message`},
		{"unknown model", validateCfg, func(r *Request) { r.Model = "gpt-9" }, "model", `unknown model "gpt-9" (want empty for the first model, or one of qwen-72b, qwen-14b)`},
		{"model in the wrong case", validateCfg, func(r *Request) { r.Model = "QWEN-72B" }, "model", `did you mean "qwen-72b"?`},
		{"negative max_tokens", validateCfg, func(r *Request) { r.MaxTokens = -1 }, "max_tokens", "-1 is negative"},
		{"absurd max_tokens", validateCfg, func(r *Request) { r.MaxTokens = 1 << 30 }, "max_tokens", "1073741824 is over the limit of 4096"},
		{"max_tokens over the default limit", nil, func(r *Request) { r.MaxTokens = 32769 }, "max_tokens", "over the limit of 32768"},
		{"negative temperature", validateCfg, func(r *Request) { r.Temperature = ptr(-0.1) }, "temperature", "-0.1 is negative (want 0..1.5)"},
		{"temperature over the limit", validateCfg, func(r *Request) { r.Temperature = ptr(1.6) }, "temperature", "1.6 is over the limit of 1.5"},
		{"temperature over the default limit", nil, func(r *Request) { r.Temperature = ptr(2.5) }, "temperature", "over the limit of 2"},
		{"NaN temperature", validateCfg, func(r *Request) { r.Temperature = ptr(math.NaN()) }, "temperature", "NaN is not a number"},
		{"infinite temperature", validateCfg, func(r *Request) { r.Temperature = ptr(math.Inf(1)) }, "temperature", "+Inf is not a number"},
		{"negative deadline", validateCfg, func(r *Request) { r.DeadlineMS = -5 }, "deadline_ms", "-5 is negative"},
		{"deadline too short", validateCfg, func(r *Request) { r.DeadlineMS = 999 }, "deadline_ms", "999 ms is below the minimum of 1000 ms"},
		{"deadline too long", validateCfg, func(r *Request) { r.DeadlineMS = 120001 }, "deadline_ms", "120001 ms is over the limit of 120000 ms (2m0s)"},
		{"deadline over the default limit", nil, func(r *Request) { r.DeadlineMS = 600001 }, "deadline_ms", "over the limit of 600000 ms (10m0s)"},
		// 10^13 ms overflows a time.Duration (ns): it read as negative, "below the minimum".
		{"deadline that overflows a Duration", validateCfg, func(r *Request) { r.DeadlineMS = 10_000_000_000_000 }, "deadline_ms", "10000000000000 ms is over the limit of 120000 ms (2m0s)"},
		{"largest deadline", nil, func(r *Request) { r.DeadlineMS = math.MaxInt64 }, "deadline_ms", "9223372036854775807 ms is over the limit of 600000 ms"},
		// 6+24 bytes of system message, 4+2000 of user message.
		{"prompt too large", validateCfg, func(r *Request) { r.Messages[1].Content = strings.Repeat("x", 2000) }, "messages", "prompt is 1.99 KiB (2034 bytes), over the limit of 1000 bytes"},
		{"prompt over the default 1 MiB", nil, func(r *Request) { r.Messages[1].Content = strings.Repeat("订", 400000) }, "messages", "prompt is 1.14 MiB (1200034 bytes), over the limit of 1 MiB (1048576 bytes)"},
		{"prompt counts tool arguments", validateCfg, func(r *Request) {
			r.Messages = []Message{
				{Role: RoleUser, Content: "q"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{Name: "f", Arguments: strings.Repeat("1", 1000)}}}},
				{Role: RoleTool, ToolCallID: "c1", Content: "r"},
				{Role: RoleUser, Content: "q2"},
			}
		}, "messages", "over the limit of 1000 bytes"},
		{"idempotency key with space", validateCfg, func(r *Request) { r.IdempotencyKey = "my key" }, "idempotency_key", "byte 2 is ' '"},
		{"idempotency key with slash", validateCfg, func(r *Request) { r.IdempotencyKey = "a/b" }, "idempotency_key", "'/'"},
		{"idempotency key too long", validateCfg, func(r *Request) { r.IdempotencyKey = strings.Repeat("k", 201) }, "idempotency_key", "201 bytes, over the limit of 200"},
		{"invalid UTF-8 in content", validateCfg, func(r *Request) { r.Messages[1].Content = "ok \xff\xfe" }, "messages[1].content", "invalid UTF-8 at byte 3"},
		{"invalid UTF-8 in user_id", validateCfg, func(r *Request) { r.UserID = "\xc3" }, "user_id", "invalid UTF-8 at byte 0"},
		{"invalid UTF-8 in tool arguments", validateCfg, func(r *Request) {
			r.Messages = []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{Name: "f", Arguments: "{\"a\":\"\xff\"}"}}}}, {Role: RoleTool, ToolCallID: "c1", Content: "x"}, {Role: RoleUser, Content: "q"}}
		}, "messages[0].tool_calls[0].function.arguments", "invalid UTF-8 at byte 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRequest()
			tt.edit(&r)
			err := Validate(r, tt.cfg)
			if err == nil {
				t.Fatalf("Validate = nil, want a problem with %s", tt.wantField)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate error is %T, want *ValidationError", err)
			}
			want := tt.wantField + ": "
			found := false
			for _, p := range ve.Problems {
				if p.Field == tt.wantField && strings.Contains(p.Problem, tt.wantText) {
					found = true
				}
			}
			if !found {
				t.Errorf("problems %q, want %s with %q", ve.Problems, tt.wantField, tt.wantText)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "invalid request: ") || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
				t.Errorf("Error() = %q, want one line naming %q", msg, tt.wantField)
			}
		})
	}
}

func TestValidationErrorListsEveryProblem(t *testing.T) {
	r := Request{
		Model:      "nope",
		Messages:   []Message{{Role: "robot", Content: "x"}, {Role: RoleAssistant, Content: "y"}},
		MaxTokens:  -1,
		DeadlineMS: -1,
	}
	err := Validate(r, validateCfg)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want *ValidationError", err)
	}
	want := []string{"messages[0].role", "messages[1].role", "model", "max_tokens", "deadline_ms"}
	got := ve.Fields()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Fields() = %v, want %v", got, want)
	}
	msg := err.Error()
	for _, f := range want {
		if !strings.Contains(msg, f+": ") {
			t.Errorf("Error() = %q, does not name %s", msg, f)
		}
	}
}

func TestValidationErrorIsBounded(t *testing.T) {
	msgs := make([]Message, 2000)
	for i := range msgs {
		msgs[i] = Message{Role: "robot", Content: "x"}
	}
	msgs[len(msgs)-1] = Message{Role: RoleUser, Content: "q"}
	err := Validate(Request{Messages: msgs}, nil)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want *ValidationError", err)
	}
	if len(ve.Problems) != maxReportedProblems {
		t.Errorf("len(Problems) = %d, want %d", len(ve.Problems), maxReportedProblems)
	}
	// Too many messages, 1999 unknown roles: 2000 problems.
	if ve.Omitted != 2000-maxReportedProblems {
		t.Errorf("Omitted = %d, want %d", ve.Omitted, 2000-maxReportedProblems)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "invalid request: messages: 2000 messages, over the limit of 1000; messages[0].role") ||
		!strings.HasSuffix(msg, "; and 1990 more problem(s)") {
		t.Errorf("Error() = %q", msg)
	}
}

func TestValidateRequestWithDefaultConfig(t *testing.T) {
	// The shipped policy must accept an ordinary request.
	if err := Validate(validRequest(), config.DefaultConfig()); err != nil {
		t.Errorf("Validate(DefaultConfig) = %v", err)
	}
}

// TestValidateRefusesUnknownScenarios: a scenario the policy does not
// name is refused, naming the known ones (a misspelt one would skip its
// rules); the known ones are accepted as rules match them, case ignored.
func TestValidateRefusesUnknownScenarios(t *testing.T) {
	cfg := config.DefaultConfig()
	for _, tc := range []struct {
		name, scenario, says string
	}{
		{"none", "", ""},
		{"request.scenarios'", "customer_service", ""},
		{"a rule's, in another case", "Medical", ""},
		{"misspelt", "medcal", `scenario: unknown scenario "medcal" (known: customer_service, medical, finance, education; the policy's request.scenarios, rules and hedge.scenarios name them)`},
		{"unknown", "billing", `unknown scenario "billing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			r.Scenario = tc.scenario
			err := Validate(r, cfg)
			switch {
			case tc.says == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("error %v, want …%s…", err, tc.says)
			}
		})
	}
}
