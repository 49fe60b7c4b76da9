package faq

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/durable-llm/durable-llm/policies/keyword"
)

func TestDefaultFAQ(t *testing.T) {
	f := DefaultFAQ()
	if f.Len() < 12 || f.Len() > 24 {
		t.Errorf("DefaultFAQ has %d entries, want about 12–20", f.Len())
	}
	if f.Source() != faqExampleSource {
		t.Errorf("Source() = %q, want %q", f.Source(), faqExampleSource)
	}
	langs := map[string]int{}
	for _, e := range f.Entries() {
		langs[e.Lang]++
	}
	if langs["en"] == 0 || langs["zh"] == 0 {
		t.Errorf("DefaultFAQ languages = %v, want English and Chinese entries", langs)
	}
	if DefaultFAQ() != f {
		t.Error("DefaultFAQ() builds a new index on every call, want one shared FAQ")
	}
	// The exported bytes parse to the same FAQ.
	g, err := ParseFAQ(DefaultFAQYAML(), "copy")
	if err != nil {
		t.Fatalf("ParseFAQ(DefaultFAQYAML()): %v", err)
	}
	if g.Len() != f.Len() {
		t.Errorf("ParseFAQ(DefaultFAQYAML()).Len() = %d, want %d", g.Len(), f.Len())
	}
}

func TestDefaultFAQMatch(t *testing.T) {
	tests := []struct {
		name     string
		question string
		wantID   string // "" means no match at the default threshold
	}{
		// English: exact and near paraphrases.
		{"en order status", "Where's my package?", "order-status-en"},
		{"en order status long", "I still haven't got my parcel, can you check where it is?", "order-status-en"},
		{"en order status few shared words", "when does my parcel arrive", "order-status-en"},
		{"en refund money back", "how long until I get my money back", "refund-en"},
		{"en refund keyword", "I'd like a refund for a broken item", "refund-en"},
		{"en password", "forgot my password, how to reset it?", "password-reset-en"},
		{"en password inflected", "I can't remember my login password", "password-reset-en"},
		{"en hours", "what time do you open on saturday", "opening-hours-en"},
		{"en shipping stemmed", "how much do you charge for delivery", "shipping-fees-en"},
		{"en invoice receipt", "can I get a receipt", "invoice-en"},
		{"en invoice copy", "send me a copy of the invoice", "invoice-en"},
		{"en cancel", "I ordered the wrong size, please cancel it", "cancel-order-en"},
		{"en human", "let me talk to a real person", "contact-human-en"},
		{"en human support", "I need to talk to someone from support", "contact-human-en"},
		{"en locked", "my account got blocked", "account-locked-en"},
		{"en payment", "my credit card was declined", "payment-failed-en"},
		{"en payment checkout", "checkout keeps failing", "payment-failed-en"},
		{"en upper case and full-width", "ＷＨＥＲＥ IS MY ORDER", "order-status-en"},

		// Chinese.
		{"zh order status", "快递怎么还没到", "order-status-zh"},
		{"zh order status paraphrase", "我的包裹到哪里了", "order-status-zh"},
		{"zh refund", "退款什么时候能到账", "refund-zh"},
		{"zh password", "密码忘了", "password-reset-zh"},
		{"zh password paraphrase", "登录密码忘记了", "password-reset-zh"},
		{"zh hours", "周六上班吗", "opening-hours-zh"},
		{"zh hours exact", "客服几点上班", "opening-hours-zh"},
		{"zh shipping", "运费怎么收", "shipping-fees-zh"},
		{"zh free shipping", "买多少钱可以包邮", "shipping-fees-zh"},
		{"zh invoice", "能开发票吗", "invoice-zh"},
		{"zh invoice reimbursement", "公司报销要发票", "invoice-zh"},
		{"zh cancel", "下错单了想取消", "cancel-order-zh"},
		{"zh human", "我要人工服务", "contact-human-zh"},
		{"zh locked", "账号被封了", "account-locked-zh"},
		{"zh payment", "支付宝付不了款", "payment-failed-zh"},

		// Mixed text.
		{"mixed cancel", "我的order怎么取消", "cancel-order-zh"},
		// Mostly Chinese: the Chinese entry (the answer in the asker's language).
		{"mixed refund", "refund 多久到账", "refund-zh"},
		{"mixed password", "password忘了怎么办", "password-reset-zh"},
		{"mixed mostly english", "I want a 退款 for my order", "refund-en"},

		// Unrelated questions.
		{"en capital of France", "what is the capital of France", ""},
		{"zh weather", "今天天气怎么样", ""},
		{"en joke", "tell me a joke", ""},
		{"en poem", "write a poem about the sea", ""},
		{"en weather", "what's the weather like today", ""},
		{"en bank account shares one word", "how do I open a bank account", ""},
		{"en time in tokyo", "what time is it in tokyo", ""},
		{"en address shares one word", "how do I change my address", ""},
		{"en quantum", "explain quantum computing", ""},
		{"zh movie", "推荐一部好看的电影", ""},
		{"zh date shares 今天", "今天是几号", ""},
		{"zh rain", "明天会下雨吗", ""},
		{"zh poem", "帮我写一首诗", ""},
		{"zh recipe", "怎么做红烧肉", ""},
		{"greeting en", "hello", ""},
		{"greeting zh", "你好", ""},
		{"empty", "", ""},
		{"punctuation only", "?!。，", ""},
	}
	f := DefaultFAQ()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := f.Match(tt.question, DefaultThreshold)
			if tt.wantID == "" {
				if ok {
					t.Errorf("Match(%q) = %q (score %.3f via %q), want no match", tt.question, m.ID, m.Score, m.Question)
				}
				return
			}
			if !ok {
				best, _ := f.Match(tt.question, 1e-9)
				t.Fatalf("Match(%q): no match, want %q (best %q at %.3f)", tt.question, tt.wantID, best.ID, best.Score)
			}
			if m.ID != tt.wantID {
				t.Errorf("Match(%q) = %q (score %.3f via %q), want %q", tt.question, m.ID, m.Score, m.Question, tt.wantID)
			}
			if m.Score < DefaultThreshold || m.Score > 1 {
				t.Errorf("Match(%q).Score = %v, want in [%v, 1]", tt.question, m.Score, DefaultThreshold)
			}
			if m.Answer == "" || m.Question == "" {
				t.Errorf("Match(%q) = %+v, want an answer and the closest paraphrase", tt.question, m)
			}
		})
	}
}

// testFAQ is a small FAQ whose scores are easy to reason about.
const testFAQ = `
entries:
  - id: refund
    questions: ['How do I get a refund?', 'I want my money back, the item is broken']
    keywords: [refund, reimburse, money back]
    answer: Refunds take 3–5 days.
  - id: hours
    lang: en
    questions: ['What are your opening hours?']
    answer: 9 to 5.
  - id: 退款
    lang: zh-CN
    questions: ['怎么申请退款？']
    keywords: [退款]
    answer: 在订单页申请。
  - id: hours-copy
    questions: ['What are your opening hours?']
    answer: Same question, later entry.
`

func TestFAQMatchScore(t *testing.T) {
	f, err := ParseFAQ([]byte(testFAQ), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		question     string
		threshold    float64
		wantOK       bool
		wantID       string
		wantQuestion string
		wantScore    float64 // checked when > 0
	}{
		{"identical paraphrase scores 1", "What are your opening hours?", 0.35, true, "hours", "What are your opening hours?", 1},
		{"tie goes to the first entry", "opening hours", 0.35, true, "hours", "What are your opening hours?", 0},
		{"closest paraphrase reported", "the item is broken, give me my money back", 0.35, true, "refund", "I want my money back, the item is broken", 0},
		{"keywords add up to the cap", "refund reimburse money back", 0.35, true, "refund", "", 1},
		{"chinese identical", "怎么申请退款?", 0.35, true, "退款", "怎么申请退款？", 1},
		{"threshold 0 means default", "What are your opening hours?", 0, true, "hours", "", 1},
		{"NaN threshold means default", "zzz qqq", math.NaN(), false, "", "", 0},
		{"threshold above the score", "opening hours please for today", 0.99, false, "", "", 0},
		{"nothing in common", "zzz qqq", 0.01, false, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := f.Match(tt.question, tt.threshold)
			if ok != tt.wantOK {
				t.Fatalf("Match(%q, %v) ok = %v (%+v), want %v", tt.question, tt.threshold, ok, m, tt.wantOK)
			}
			if !ok {
				return
			}
			if m.ID != tt.wantID {
				t.Errorf("ID = %q, want %q", m.ID, tt.wantID)
			}
			if tt.wantQuestion != "" && m.Question != tt.wantQuestion {
				t.Errorf("Question = %q, want %q", m.Question, tt.wantQuestion)
			}
			if tt.wantScore > 0 && math.Abs(m.Score-tt.wantScore) > 1e-9 {
				t.Errorf("Score = %v, want %v", m.Score, tt.wantScore)
			}
		})
	}
}

func TestFAQKeywordBonusAloneIsNotEnough(t *testing.T) {
	// "reimburse" is a keyword of the refund entry but appears in none of its
	// paraphrases: with nothing else in common, the bonus must not reach the
	// default threshold on its own.
	f, err := ParseFAQ([]byte(`
entries:
  - id: refund
    questions: ['How do I get a refund?']
    keywords: [reimburse]
    answer: Refunds take 3–5 days.
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := f.Match("will my company reimburse the hotel and taxi costs", 1e-9)
	if m.Score >= DefaultThreshold {
		t.Errorf("score of a lone keyword = %.3f, want < %v", m.Score, DefaultThreshold)
	}
	// The bonus counts in proportion to how much of the question the entry
	// explains: here little, so it adds little.
	if m.Score <= 0 || m.Score >= faqKeywordBonus {
		t.Errorf("score of a lone keyword = %.3f, want in (0, %v)", m.Score, faqKeywordBonus)
	}
}

func TestFAQNilAndConcurrent(t *testing.T) {
	var f *FAQ
	if _, ok := f.Match("where is my order", 0); ok || f.Len() != 0 || f.Source() != "" {
		t.Error("nil FAQ matched or has entries")
	}
	d := DefaultFAQ()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if m, ok := d.Match("我的包裹到哪里了", 0); !ok || m.ID != "order-status-zh" {
					t.Errorf("concurrent Match = %+v, %v", m, ok)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestParseFAQErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error, each naming file, line or field
	}{
		{"empty file", ``, []string{"bad.yaml:1: entries: missing"}},
		{"not a mapping", `- id: x`, []string{"bad.yaml:1: (top level)", "want a mapping"}},
		{"no entries key", `faq: []`, []string{"bad.yaml:1: faq: unknown field", "entries: missing"}},
		{"empty entries", `entries: []`, []string{"entries: empty"}},
		{"entries twice", "entries: []\nentries: []", []string{"bad.yaml:2: entries: given twice"}},
		{"entry not a mapping", "entries:\n  - just text", []string{`bad.yaml:2: entries[0]: "just text" (want a mapping`}},
		{"id missing", "entries:\n  - questions: [q]\n    answer: a", []string{"bad.yaml:2: entries[0].id: missing"}},
		{"id with spaces", "entries:\n  - id: a b\n    questions: [q]\n    answer: a", []string{"entries[0].id", "spaces"}},
		{"duplicate id", "entries:\n  - id: a\n    questions: [q]\n    answer: a\n  - id: a\n    questions: [q]\n    answer: a",
			[]string{"bad.yaml:5: entries[1].id: duplicate id \"a\" (first at line 2)"}},
		{"no questions", "entries:\n  - id: a\n    answer: a", []string{"entries[0].questions: missing in entries[0] (id \"a\")"}},
		{"empty questions list", "entries:\n  - id: a\n    questions: []\n    answer: a", []string{"entries[0].questions: empty"}},
		{"blank question", "entries:\n  - id: a\n    questions: [q, '  ']\n    answer: a", []string{"entries[0].questions[1]: empty question"}},
		{"empty answer", "entries:\n  - id: a\n    questions: [q]\n    answer: ''", []string{"entries[0].answer: missing or empty"}},
		{"missing answer", "entries:\n  - id: a\n    questions: [q]", []string{"entries[0].answer: missing or empty in entries[0] (id \"a\")"}},
		{"blank keyword", "entries:\n  - id: a\n    questions: [q]\n    keywords: ['']\n    answer: a", []string{"entries[0].keywords[0]: empty keyword"}},
		{"unknown field", "entries:\n  - id: a\n    questions: [q]\n    anwser: a", []string{"bad.yaml:4: entries[0].anwser: unknown field", "entries[0].answer: missing"}},
		{"field given twice", "entries:\n  - id: a\n    id: b\n    questions: [q]\n    answer: a", []string{"bad.yaml:3: entries[0].id: given twice"}},
		{"answer is a list", "entries:\n  - id: a\n    questions: [q]\n    answer: [x]", []string{"entries[0].answer: a list (want a string)"}},
		{"questions is a mapping", "entries:\n  - id: a\n    questions: {a: b}\n    answer: a", []string{"entries[0].questions: a mapping (want a list of strings)"}},
		{"bad lang", "entries:\n  - id: a\n    lang: chinese\n    questions: [q]\n    answer: a", []string{"entries[0].lang: \"chinese\" is not a language tag"}},
		{"yaml syntax", "entries: [", []string{"invalid FAQ bad.yaml", "yaml"}},
		{"every problem reported", "entries:\n  - questions: [q]\n  - id: b\n    answer: a",
			[]string{"entries[0].id: missing", "entries[0].answer", "entries[1].questions: missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFAQ([]byte(tt.yaml), "bad.yaml")
			if err == nil {
				t.Fatalf("ParseFAQ = %d entries, want an error", f.Len())
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\n  does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestParseFAQAccepts(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		wantQs    int
		wantKWs   int
		wantLang  string
		wantAnswr string
	}{
		{"single string question", "entries:\n  - id: a\n    questions: Where is it?\n    answer: Here.", 1, 0, "", "Here."},
		{"folded answer", "entries:\n  - id: a\n    lang: zh-CN\n    questions: [q1, q2]\n    keywords: [k]\n    answer: >-\n      one\n      two", 2, 1, "zh-CN", "one two"},
		{"numeric id", "entries:\n  - id: 42\n    questions: [q]\n    answer: a", 1, 0, "", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFAQ([]byte(tt.yaml), "ok.yaml")
			if err != nil {
				t.Fatal(err)
			}
			e := f.Entries()[0]
			if len(e.Questions) != tt.wantQs || len(e.Keywords) != tt.wantKWs || e.Lang != tt.wantLang || e.Answer != tt.wantAnswr {
				t.Errorf("entry = %+v, want %d questions, %d keywords, lang %q, answer %q", e, tt.wantQs, tt.wantKWs, tt.wantLang, tt.wantAnswr)
			}
		})
	}
}

func TestFAQEntriesIsACopy(t *testing.T) {
	f, err := ParseFAQ([]byte(testFAQ), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	es := f.Entries()
	es[0].Questions[0] = "changed"
	es[0].Answer = "changed"
	if m, ok := f.Match("How do I get a refund?", 0); !ok || m.Answer == "changed" || m.Question == "changed" {
		t.Errorf("changing Entries() changed the FAQ: %+v", m)
	}
}

func TestLoadFAQ(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "faq.yaml")
	if err := os.WriteFile(good, []byte(testFAQ), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("entries:\n  - id: x\n    questions: [q]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr string
	}{
		{"good file", good, ""},
		{"invalid file names the path and field", bad, bad + ":2: entries[0].answer"},
		{"missing file names the path", filepath.Join(dir, "nope.yaml"), "nope.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := LoadFAQ(tt.path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if f.Source() != tt.path || f.Len() != 4 {
					t.Errorf("LoadFAQ = source %q, %d entries; want %q, 4", f.Source(), f.Len(), tt.path)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadFAQ error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestFAQStem(t *testing.T) {
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"refund", "refunds", "refunded", "refunding"}, "refund"},
		{[]string{"ship", "ships", "shipped", "shipping"}, "ship"},
		{[]string{"cancel", "cancels", "cancelled", "canceled", "cancelling"}, "cancel"},
		{[]string{"charge", "charges", "charged", "charging"}, "charg"},
		{[]string{"delivery", "deliveries"}, "deliveri"},
		{[]string{"invoice", "invoices"}, "invoic"},
		{[]string{"address", "addresses"}, "addres"},
		{[]string{"status"}, "status"},
		{[]string{"pay", "vat", "24"}, ""}, // short words unchanged
	}
	for _, tt := range tests {
		t.Run(tt.words[0], func(t *testing.T) {
			for _, w := range tt.words {
				want := tt.want
				if want == "" {
					want = w
				}
				if got := faqStem(w); got != want {
					t.Errorf("faqStem(%q) = %q, want %q", w, got, want)
				}
			}
		})
	}
}

func TestFAQFeaturesCJKStopWords(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []string
		notWant []string
	}{
		{"function words cut the run", "我的订单到哪了", []string{"b:订单", "b:单到", "b:到哪"}, []string{"b:我的", "b:哪了", "u:的", "u:了"}},
		{"longest stop word wins", "今天天气怎么样", []string{"b:今天", "b:天气"}, []string{"b:气怎", "u:样"}},
		{"mixed text", "我的order怎么取消", []string{"w:order", "b:取消"}, []string{"b:么取"}},
		{"english stop words", "How do I get a refund?", []string{"w:refund", "t:ref"}, []string{"w:how", "w:get"}},
		{"apostrophes join", "what's my order’s status", []string{"w:order", "w:status"}, []string{"w:s", "w:what"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkFeatures(t, tt.text, faqFeatures(keyword.Fold(tt.text), nil), tt.want, tt.notWant)
		})
	}
}

func BenchmarkFAQMatch(b *testing.B) {
	f := DefaultFAQ()
	qs := []string{"I still haven't got my parcel, can you check where it is?", "退款什么时候能到账", "what is the capital of France"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Match(qs[i%len(qs)], 0)
	}
}

// What a customer notices while the upstream is down (issue 15): the
// common questions get their answer, and a question that shares words with
// an entry but asks something else gets none.
func TestDefaultFAQAnswersCommonQuestions(t *testing.T) {
	tests := []struct{ question, wantID string }{
		{"How long does delivery take to Canada?", "delivery-time-en"},
		{"How long does shipping to Japan take?", "delivery-time-en"},
		{"寄到美国要几天？", "delivery-time-zh"},
		{"I want my money back for a broken blender", "refund-en"},
		{"我的包裹怎么还没到", "order-status-zh"},
		{"How do I reset my password?", "password-reset-en"},
		{"how do i cancle my order", "cancel-order-en"}, // typo
		// Questions other packages' tests ask of the FAQ.
		{"How do I get a refund for my order?", "refund-en"},
		{"Where is my order? I want to track my package.", "order-status-en"},
		// Near-misses: no answer rather than a wrong one.
		{"how long does my battery last", ""},
		{"when will I get my tax refund from the IRS", ""},
		{"路由器密码怎么重置", ""},
		{"Explain the difference between a heap and a stack.", ""},
	}
	f := DefaultFAQ()
	for _, tt := range tests {
		m, ok := f.Match(tt.question, DefaultThreshold)
		switch {
		case tt.wantID == "" && ok:
			t.Errorf("Match(%q) = %q (score %.3f via %q), want no answer", tt.question, m.ID, m.Score, m.Question)
		case tt.wantID != "" && m.ID != tt.wantID:
			t.Errorf("Match(%q) = %q, %v (score %.3f), want %q", tt.question, m.ID, ok, m.Score, tt.wantID)
		}
	}
}

// A typo beyond one edit is read by its character trigrams, only as a word
// of the same first letter and about the same length.
func TestFAQTyposFar(t *testing.T) {
	var ty faqTypos
	for _, w := range []string{"receive", "password", "cancellation", "delivery", "order"} {
		ty.add(w)
	}
	tests := map[string]string{
		"passwrodd":    "password", // two edits
		"cancellatoin": "cancellation",
		"router":       "", // shares "er " with nothing long enough
		"battery":      "",
		"paris":        "", // too short
	}
	for in, want := range tests {
		if got := ty.correctFar(in); got != want {
			t.Errorf("correctFar(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFAQTypos(t *testing.T) {
	var ty faqTypos
	for _, w := range []string{"refund", "cancel", "password", "order", "card"} {
		ty.add(w)
	}
	tests := map[string]string{
		"refnud": "refund", "cancle": "cancel", "pasword": "password", "passwordd": "password", "refunds": "refund",
		"banana": "",      // nothing one edit away
		"ordr":   "order", // a short word may lack a letter …
		"cart":   "",      // … but one letter changed makes another word
		"car":    "",      // too short to correct
	}
	for in, want := range tests {
		if got := ty.correct(in); got != want {
			t.Errorf("correct(%q) = %q, want %q", in, got, want)
		}
	}
}

// The lexicon reads words that mean the same as one (on both sides) and a
// Chinese character typed for its homophone as the FAQ's character, but
// only where that makes a pair the FAQ uses.
func TestFAQLexicon(t *testing.T) {
	f := DefaultFAQ()
	tests := []struct {
		name    string
		text    string
		want    []string
		notWant []string
	}{
		{"homophone typo 果 for 裹", "我的包果到哪了", []string{"b:包裹"}, []string{"b:包果"}},
		{"homophone typo 宽 for 款", "退宽怎么弄", []string{"b:退款"}, []string{"b:退宽"}},
		{"homophone typo 销 for 消", "怎么取销订单", []string{"b:取消", "b:订单"}, []string{"b:取销"}},
		{"no homophone for a pair the FAQ knows", "包裹到哪了", []string{"b:包裹"}, nil},
		{"unknown words stay unknown", "今天天气怎么样", []string{"b:天气"}, nil},
		{"variant character", "帐号被锁了", []string{"b:账号"}, []string{"b:帐号"}},
		{"courier is delivery", "顺丰几天到", []string{"b:快递"}, []string{"b:顺丰"}},
		{"english synonym", "where is my parcel", []string{"w:packag"}, []string{"w:parcel"}},
		{"irregular past", "I paid twice", []string{"w:pay"}, []string{"w:paid"}},
		{"inflected synonym", "they reimburses me", []string{"w:refund"}, []string{"w:reimburs"}},
		{"shipping is delivery", "has it shipped", []string{"w:deliveri"}, []string{"w:ship"}},
		{"phrase", "I can't log in", []string{"w:login"}, []string{"w:log"}},
		{"phrase over a typo", "order not recieved", []string{"w:order", "w:mis"}, []string{"w:receiv"}},
		{"phrase keeps its stop words", "how soon will it arrive", []string{"w:long", "w:arriv"}, []string{"w:soon"}},
		{"country", "do you ship to Germany", []string{"w:countri"}, []string{"w:germani"}},
		{"no phrase across Chinese text", "log 退款 in", []string{"w:log"}, []string{"w:login"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkFeatures(t, tt.text, faqFeatures(keyword.Fold(tt.text), f), tt.want, tt.notWant)
		})
	}
}

// checkFeatures reports the features of text that tf lacks from want or
// has from notWant.
func checkFeatures(t *testing.T, text string, tf map[string]float64, want, notWant []string) {
	t.Helper()
	for _, w := range want {
		if _, ok := tf[w]; !ok {
			t.Errorf("features of %q lack %q: %v", text, w, tf)
		}
	}
	for _, w := range notWant {
		if _, ok := tf[w]; ok {
			t.Errorf("features of %q have %q", text, w)
		}
	}
}
