package rules

import (
	"slices"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

// testRules are the business rules of docs/how-it-works.md, step 2.
var testRules = []config.Rule{
	{ID: "medical-urgent", Scenario: "medical", Keywords: []string{"出血", "紧急", "疼痛", "chest pain", "bleeding"},
		Action: config.RuleHandoff, Message: "请立即联系医生或拨打 120。"},
	{ID: "finance-sensitive", Scenario: "finance", Keywords: []string{"转账", "支付", "密码", "password", "transfer"},
		Action: config.RuleSafeMessage, Message: "为了您的安全，请稍后再试。", Flag: "risk_review"},
	{ID: "education-homework", Scenario: "education", Keywords: []string{"作业"}, Action: config.RuleNoRetry},
	{ID: "any-lawsuit", Keywords: []string{"lawsuit", "起诉"}, Action: config.RuleNoRetry, Message: "We cannot give legal advice."},
}

func TestCheckRules(t *testing.T) {
	tests := []struct {
		name     string
		scenario string
		question string
		wantID   string // "" means no rule
		wantAct  config.RuleAction
		wantFlag string
	}{
		{"medical 出血 hands off", "medical", "我的伤口一直出血怎么办", "medical-urgent", config.RuleHandoff, ""},
		{"medical chest pain hands off", "medical", "I have chest pain since this morning", "medical-urgent", config.RuleHandoff, ""},
		{"medical keyword case-insensitive", "medical", "CHEST PAIN after running", "medical-urgent", config.RuleHandoff, ""},
		{"medical keyword across extra spaces", "medical", "sudden chest\t  pain", "medical-urgent", config.RuleHandoff, ""},
		{"medical keyword full-width", "medical", "ｃｈｅｓｔ ｐａｉｎ", "medical-urgent", config.RuleHandoff, ""},
		{"medical keyword as word prefix", "medical", "the cut keeps bleeding", "medical-urgent", config.RuleHandoff, ""},
		{"scenario case-insensitive", "Medical", "出血", "medical-urgent", config.RuleHandoff, ""},
		{"scenario surrounding spaces", " MEDICAL ", "出血", "medical-urgent", config.RuleHandoff, ""},
		{"finance 转账 safe message with flag", "finance", "帮我转账五千元", "finance-sensitive", config.RuleSafeMessage, "risk_review"},
		{"finance password safe message with flag", "finance", "What is my Password?", "finance-sensitive", config.RuleSafeMessage, "risk_review"},
		{"no_retry rule", "education", "这道作业题怎么做", "education-homework", config.RuleNoRetry, ""},
		{"empty rule scenario matches any", "customer_service", "I will file a lawsuit", "any-lawsuit", config.RuleNoRetry, ""},
		{"empty rule scenario matches empty scenario", "", "我要起诉你们", "any-lawsuit", config.RuleNoRetry, ""},
		{"same keyword in another scenario", "customer_service", "我的伤口一直出血", "", "", ""},
		{"finance keyword in medical scenario", "medical", "forgot my password", "", "", ""},
		{"medical keyword with empty scenario", "", "chest pain", "", "", ""},
		{"no keyword", "medical", "what vitamins should I take", "", "", ""},
		{"ascii keyword may run into a longer word", "finance", "what about my passwordless login? no: mypassword", "finance-sensitive", config.RuleSafeMessage, "risk_review"},
		{"ascii keyword not at a word start", "finance", "mypassword and retransfer", "", "", ""},
		{"empty question", "medical", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := CheckRules(testRules, tt.scenario, tt.question)
			if tt.wantID == "" {
				if ok {
					t.Errorf("CheckRules(%q, %q) = %q, want no rule", tt.scenario, tt.question, r.ID)
				}
				return
			}
			if !ok {
				t.Fatalf("CheckRules(%q, %q): no rule, want %q", tt.scenario, tt.question, tt.wantID)
			}
			if r.ID != tt.wantID || r.Action != tt.wantAct || r.Flag != tt.wantFlag {
				t.Errorf("CheckRules(%q, %q) = %q %s flag %q, want %q %s flag %q",
					tt.scenario, tt.question, r.ID, r.Action, r.Flag, tt.wantID, tt.wantAct, tt.wantFlag)
			}
		})
	}
}

func TestCheckRulesOrderAndEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		rules  []config.Rule
		wantID string
	}{
		{"first matching rule wins", []config.Rule{
			{ID: "a", Keywords: []string{"refund"}, Action: config.RuleNoRetry},
			{ID: "b", Keywords: []string{"refund"}, Action: config.RuleHandoff},
		}, "a"},
		{"a rule without keywords never matches", []config.Rule{
			{ID: "none", Action: config.RuleHandoff},
			{ID: "b", Keywords: []string{"refund"}, Action: config.RuleNoRetry},
		}, "b"},
		{"blank keywords never match", []config.Rule{
			{ID: "blank", Keywords: []string{"", "  "}, Action: config.RuleHandoff},
		}, ""},
		{"keyword with capitals and spaces", []config.Rule{
			{ID: "k", Keywords: []string{"  REFUND  "}, Action: config.RuleNoRetry},
		}, "k"},
		{"no rules", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := CheckRules(tt.rules, "x", "I want a refund")
			if ok != (tt.wantID != "") || r.ID != tt.wantID {
				t.Errorf("CheckRules = %q, %v; want %q", r.ID, ok, tt.wantID)
			}
		})
	}
}

func TestRuleCard(t *testing.T) {
	rules := []config.Rule{
		{ID: "no-message", Scenario: "shop", Keywords: []string{"refund"}, Action: config.RuleNoRetry},
		{ID: "card", Scenario: "shop", Keywords: []string{"refund", "退款"}, Action: config.RuleNoRetry, Message: "Refunds: see your orders page."},
		{ID: "blank-message", Keywords: []string{"invoice"}, Action: config.RuleNoRetry, Message: "  "},
		{ID: "safe", Scenario: "finance", Keywords: []string{"转账"}, Action: config.RuleSafeMessage, Message: "请稍后再试。", Flag: "risk_review"},
		{ID: "person", Scenario: "medical", Keywords: []string{"pain"}, Action: config.RuleHandoff, Message: "A person will take over now."},
		{ID: "after-failures", Scenario: "bank", Keywords: []string{"pin"}, Action: config.RuleSafeMessage, Message: "Try later.",
			After: &config.RuleAfter{Count: 1}},
		{ID: "off", Scenario: "shop", Keywords: []string{"voucher"}, Action: config.RuleNoRetry, Message: "Vouchers: see the app."},
	}
	tests := []struct {
		name      string
		scenario  string
		question  string
		wantCheck string // CheckRules
		wantCard  string // RuleCard
	}{
		{"card skips a rule without a message", "shop", "I want a refund", "no-message", "card"},
		{"chinese keyword", "SHOP", "退款多久到账", "card", "card"},
		{"blank message is no card", "shop", "where is my invoice", "blank-message", ""},
		{"safe_message is a card too", "finance", "转账失败", "safe", "safe"},
		{"a handoff's message promises a person: never a card", "medical", "back pain", "person", ""},
		{"a rule that waits for failures is no card", "bank", "I forgot my pin", "", ""},
		{"a rule the learner turned off is no card", "shop", "my voucher code", "off", ""},
		{"other scenario", "medical", "I want a refund", "", ""},
		{"no keyword", "shop", "hello", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := CheckRules(rules, tt.scenario, tt.question)
			if r.ID != tt.wantCheck {
				t.Errorf("CheckRules = %q, want %q", r.ID, tt.wantCheck)
			}
			c, ok := RuleCard(rules, func(_, id string) bool { return id != "off" }, tt.scenario, tt.question)
			if c.ID != tt.wantCard || ok != (tt.wantCard != "") {
				t.Errorf("RuleCard = %q, %v; want %q", c.ID, ok, tt.wantCard)
			}
			if ok && c.Message == "" {
				t.Errorf("RuleCard returned %q without a message", c.ID)
			}
		})
	}
}

func TestCheckRulesDefaultPolicy(t *testing.T) {
	// docs/rules.md against the shipped policy file: emergency
	// words hand off before any call; the other rules wait for failures.
	rules := config.DefaultConfig().Rules
	tests := []struct {
		name      string
		scenario  string
		question  string
		wantFired string
		wantAfter []string
	}{
		{"medical 大出血", "medical", "伤口大出血怎么办", "medical-emergency", nil},
		{"medical chest pain", "medical", "Sudden CHEST PAIN when climbing stairs", "medical-emergency", nil},
		{"medical curly apostrophe", "medical", "I can’t breathe", "medical-emergency", nil},
		{"medical 出血 waits for failures", "medical", "伤口一直出血怎么办", "", []string{"medical-urgent"}},
		{"finance 转账", "finance", "帮我转账给张三", "", []string{"finance-sensitive"}},
		{"finance password", "finance", "I forgot my password", "", []string{"finance-sensitive"}},
		{"homework", "education", "这道作业题怎么做", "", []string{"education-steps"}},
		{"password outside finance", "customer_service", "I forgot my password", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Admit(rules, nil, tt.scenario, tt.question)
			fired := ""
			if v.Fired != nil {
				fired = v.Fired.ID
			}
			var after []string
			for _, p := range v.After {
				after = append(after, p.Rule.ID)
			}
			if fired != tt.wantFired || !slices.Equal(after, tt.wantAfter) {
				t.Errorf("Admit fired %q, after %v; want %q, %v", fired, after, tt.wantFired, tt.wantAfter)
			}
		})
	}
}

// TestAdmitGate: a rule the learner turned off does not fire and is
// reported in shadow; the next matching rule fires; pinned rules fire
// whatever the gate says.
func TestAdmitGate(t *testing.T) {
	rules := []config.Rule{
		{ID: "later", Keywords: []string{"refund"}, Action: config.RuleHandoff, Message: "m", After: &config.RuleAfter{Count: 1}},
		{ID: "off", Keywords: []string{"refund"}, Action: config.RuleSafeMessage, Message: "m"},
		{ID: "next", Keywords: []string{"refund"}, Action: config.RuleHandoff, Message: "m"},
		{ID: "pinned", Keywords: []string{"urgent"}, Action: config.RuleHandoff, Message: "m", Pinned: true},
	}
	allOff := func(scenario, id string) bool { return id != "off" && id != "pinned" && id != "later" }
	v := Admit(rules, allOff, "", "I want a refund")
	if v.Fired == nil || v.Fired.ID != "next" || !slices.Equal(v.Shadow, []string{"off"}) {
		t.Fatalf("Admit = %+v, want next fired and off in shadow", v)
	}
	if len(v.After) != 1 || v.After[0].Rule.ID != "later" || !v.After[0].Off {
		t.Fatalf("After = %+v, want later, off", v.After)
	}
	if v := Admit(rules, allOff, "", "urgent!"); v.Fired == nil || v.Fired.ID != "pinned" {
		t.Fatalf("a pinned rule must fire whatever the gate says, got %+v", v)
	}
}
