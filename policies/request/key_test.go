package request

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var keyMsgs = []Message{
	{Role: RoleSystem, Content: "You are a helpful assistant."},
	{Role: RoleUser, Content: "Where is my order?"},
}

func TestKeyGolden(t *testing.T) {
	// These values are workflow IDs of calls that may still be running or
	// recorded: a change here breaks deduplication across a deployment. They
	// were computed independently of this code, in Python:
	//   "llm-" + sha256(json.dumps([tenant, user, session, msgs],
	//       ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
	tests := []struct {
		name                  string
		tenant, user, session string
		msgs                  []Message
		want                  string
	}{
		{"english", "", "u-42", "s-7", keyMsgs,
			"llm-de4b3f60e8d8a58b9052cb7cbab420b91749166698e57b0ce6704d0be394d0d5"},
		{"chinese with tenant", "acme", "用户-1", "会话-9", []Message{{Role: RoleUser, Content: "我的订单到哪了？<急>"}},
			"llm-063be2f4fb3b1a937b510ae6e30b3c56c57a21d38eb0cf4e6a3c2cdd8bdc900e"},
		{"no messages", "", "", "", nil,
			"llm-deededb26174112db34661e21947e64e53f8d52582e3d6280fce3381d425524d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Key(tt.tenant, tt.user, tt.session, tt.msgs)
			if got != tt.want {
				t.Errorf("Key = %s, want %s", got, tt.want)
			}
			if err := ValidateKey(got); err != nil {
				t.Errorf("ValidateKey(Key(...)) = %v", err)
			}
			if len(got) != len(KeyPrefix)+64 || !strings.HasPrefix(got, KeyPrefix) {
				t.Errorf("Key = %q, want %q and 64 hex digits", got, KeyPrefix)
			}
		})
	}
}

func TestKeyCanonicalEncoding(t *testing.T) {
	// The documented canonical bytes, so another language can reproduce Key.
	msgs := []Message{
		{Role: RoleUser, Content: "a<b>&c"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: "{}"}}}},
		{Role: RoleTool, Content: "ok", ToolCallID: "c1", Name: "f"},
	}
	got := string(canonicalJSON("t", "u", "s", msgs, nil))
	want := `["t","u","s",[{"role":"user","content":"a<b>&c"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","content":"ok","name":"f","tool_call_id":"c1"}]]`
	if got != want {
		t.Errorf("canonical encoding\n got %s\nwant %s", got, want)
	}
	sum := sha256.Sum256([]byte(want))
	if k := Key("t", "u", "s", msgs); k != KeyPrefix+hex.EncodeToString(sum[:]) {
		t.Errorf("Key is not the SHA-256 of the canonical bytes: %s", k)
	}
}

func TestKeyChangesWithEveryField(t *testing.T) {
	base := Key("acme", "u-42", "s-7", keyMsgs)
	with := func(f func(m []Message) []Message) []Message {
		c := slices.Clone(keyMsgs)
		return f(c)
	}
	tests := []struct {
		name string
		key  string
	}{
		{"tenant", Key("acme2", "u-42", "s-7", keyMsgs)},
		{"empty tenant", Key("", "u-42", "s-7", keyMsgs)},
		{"user", Key("acme", "u-43", "s-7", keyMsgs)},
		{"session", Key("acme", "u-42", "s-8", keyMsgs)},
		{"content", Key("acme", "u-42", "s-7", with(func(m []Message) []Message { m[1].Content += " "; return m }))},
		{"role", Key("acme", "u-42", "s-7", with(func(m []Message) []Message { m[0].Role = RoleDeveloper; return m }))},
		{"name", Key("acme", "u-42", "s-7", with(func(m []Message) []Message { m[1].Name = "bob"; return m }))},
		{"tool call id", Key("acme", "u-42", "s-7", with(func(m []Message) []Message { m[1].ToolCallID = "x"; return m }))},
		{"tool calls", Key("acme", "u-42", "s-7", with(func(m []Message) []Message {
			m[0].ToolCalls = []ToolCall{{ID: "c", Type: "function", Function: FunctionCall{Name: "f"}}}
			return m
		}))},
		{"message order", Key("acme", "u-42", "s-7", []Message{keyMsgs[1], keyMsgs[0]})},
		{"one message less", Key("acme", "u-42", "s-7", keyMsgs[1:])},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if prev, dup := seen[tt.key]; dup {
				t.Errorf("changing the %s gives the same key as %s: %s", tt.name, prev, tt.key)
			}
			seen[tt.key] = tt.name
		})
	}
	t.Run("stable", func(t *testing.T) {
		if again := Key("acme", "u-42", "s-7", slices.Clone(keyMsgs)); again != base {
			t.Errorf("Key differs on the same input: %s then %s", base, again)
		}
	})
	t.Run("nil and empty messages alike", func(t *testing.T) {
		if Key("a", "b", "c", nil) != Key("a", "b", "c", []Message{}) {
			t.Error("nil and empty message lists give different keys")
		}
	})
}

func TestKeyFieldBoundaries(t *testing.T) {
	tests := []struct {
		name string
		a, b [3]string
	}{
		{"tenant/user", [3]string{"a", "bc", ""}, [3]string{"ab", "c", ""}},
		{"user/session", [3]string{"", "a", "bc"}, [3]string{"", "ab", "c"}},
		{"shifted empty", [3]string{"x", "", ""}, [3]string{"", "x", ""}},
		{"separator in value", [3]string{`a","b`, "", ""}, [3]string{"a", "b", ""}},
		{"nul in value", [3]string{"a\x00b", "", ""}, [3]string{"a", "b", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka := Key(tt.a[0], tt.a[1], tt.a[2], keyMsgs)
			kb := Key(tt.b[0], tt.b[1], tt.b[2], keyMsgs)
			if ka == kb {
				t.Errorf("Key%q == Key%q", tt.a, tt.b)
			}
		})
	}
	t.Run("content/role", func(t *testing.T) {
		a := Key("", "", "", []Message{{Role: "user", Content: "ab"}})
		b := Key("", "", "", []Message{{Role: "usera", Content: "b"}})
		if a == b {
			t.Error("role and content boundary is ambiguous")
		}
	})
}

// jsonNames are the JSON names of typ's fields, in order.
func jsonNames(typ reflect.Type) []string {
	var names []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

func TestCanonicalMessageCoversMessage(t *testing.T) {
	// Adding a field to Message must be a decision about the key: either add
	// it to canonicalMessage (every key with it set changes) or list it here
	// as deliberately left out.
	// Parts is "-" on Message (its own MarshalJSON writes them as the
	// content array) and "parts" in the key: decided.
	want := jsonNames(reflect.TypeFor[Message]())
	want[slices.Index(want, "-")] = "parts"
	if got := jsonNames(reflect.TypeFor[canonicalMessage]()); !slices.Equal(got, want) {
		t.Errorf("canonicalMessage fields %v, Message fields %v: decide how the key treats the difference", got, want)
	}
}

func TestKeyFor(t *testing.T) {
	derived := Key("acme", "u", "s", keyMsgs)
	if ScopedKey("acme", "k1") == ScopedKey("globex", "k1") {
		t.Fatal("tenants share a scoped key")
	}
	tests := []struct {
		name   string
		tenant string
		key    string
		want   string
	}{
		{"no caller key: derived", "acme", "", derived},
		{"caller key without tenant used as is", "", "order-123:retry", "order-123:retry"},
		{"caller key scoped by tenant", "acme", "k1", ScopedKey("acme", "k1")},
		{"same caller key, other tenant, other call", "globex", "k1", ScopedKey("globex", "k1")},
		{"invalid caller key ignored", "acme", "has space", derived},
		{"caller key with slash ignored", "acme", "a/b", derived},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Tenant: tt.tenant, UserID: "u", SessionID: "s", Messages: keyMsgs, IdempotencyKey: tt.key}
			if got := KeyFor(r); got != tt.want {
				t.Errorf("KeyFor = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestScopedKey(t *testing.T) {
	tests := []struct {
		name string
		a, b [2]string
		same bool
	}{
		{"deterministic", [2]string{"acme", "k1"}, [2]string{"acme", "k1"}, true},
		{"tenants never collide", [2]string{"acme", "k1"}, [2]string{"globex", "k1"}, false},
		{"keys differ", [2]string{"acme", "k1"}, [2]string{"acme", "k2"}, false},
		{"boundary", [2]string{"ab", "c"}, [2]string{"a", "bc"}, false},
		{"empty tenant", [2]string{"", "k1"}, [2]string{"k1", ""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, kb := ScopedKey(tt.a[0], tt.a[1]), ScopedKey(tt.b[0], tt.b[1])
			if (ka == kb) != tt.same {
				t.Errorf("ScopedKey%q = %s, ScopedKey%q = %s, same = %v, want %v", tt.a, ka, tt.b, kb, ka == kb, tt.same)
			}
			if err := ValidateKey(ka); err != nil {
				t.Errorf("ValidateKey(ScopedKey) = %v", err)
			}
		})
	}
	t.Run("golden", func(t *testing.T) {
		// Python: "llm-" + sha256(b"acme\x00order-123").hexdigest()
		const want = "llm-ac0b5c049e0c374e47e3b13384e9b8c8300c185f2c84d9df98fffdf43d40539f"
		if got := ScopedKey("acme", "order-123"); got != want {
			t.Errorf("ScopedKey = %s, want %s", got, want)
		}
	})
	t.Run("never equals a derived key", func(t *testing.T) {
		if ScopedKey("", "") == Key("", "", "", nil) {
			t.Error("scoped and derived keys collide")
		}
	})
}

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		wantErr string // "" means valid
	}{
		{"derived key", Key("", "u", "s", keyMsgs), ""},
		{"uuid", "3f2b8c1e-5a4d-4e7f-9b2a-1c3d5e7f9a0b", ""},
		{"punctuation", "order:123_retry.v2~!@#$%^&*()", ""},
		{"200 bytes", strings.Repeat("k", 200), ""},
		{"empty", "", "empty"},
		{"201 bytes", strings.Repeat("k", 201), "201 bytes, over the limit of 200"},
		{"space", "order 1", "byte 5 is ' '"},
		{"slash", "tenant/key", "byte 6 is '/'"},
		{"tab", "a\tb", `byte 1 is '\t'`},
		{"nul", "a\x00", `byte 1 is '\x00'`},
		{"del", "a\x7f", `byte 1 is '\x7f'`},
		{"chinese", "订单", "byte 0 is 0xe8, not ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateKey(tt.key)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("ValidateKey(%q) = %v, want nil", tt.key, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateKey(%q) = nil, want an error containing %q", tt.key, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey containing %q", tt.key, err, tt.wantErr)
			}
		})
	}
}

// TestAnswerShapeCoversRequest: a field added to Request must be a
// decision about the key: part of the answer's shape (two requests that
// differ in it are two calls) or listed here as not changing the answer.
func TestAnswerShapeCoversRequest(t *testing.T) {
	// Who asks and the messages are the array's first four elements; the
	// idempotency key replaces the derived key; stream and stream_deltas
	// do not change the answer (only how it is delivered); step is set
	// only on the child calls of a step-by-step answer, whose IDs the
	// parent names. Every other field must be in the shape.
	notShape := []string{"tenant", "user_id", "session_id", "messages", "idempotency_key", "stream", "stream_deltas", "step"}
	shape := jsonNames(reflect.TypeFor[answerShape]())
	for _, f := range jsonNames(reflect.TypeFor[Request]()) {
		if !slices.Contains(shape, f) && !slices.Contains(notShape, f) {
			t.Errorf("Request field %q is neither in answerShape nor listed as outside the key's shape", f)
		}
	}
	for _, f := range shape {
		if !slices.Contains(jsonNames(reflect.TypeFor[Request]()), f) {
			t.Errorf("answerShape field %q is not a Request field", f)
		}
	}
}

func TestKeyForCoversEveryAnswerField(t *testing.T) {
	// A request that differs in any field that changes the answer is
	// another call: the same messages with another model, scenario,
	// max_tokens, temperature, deadline or tools must not get the first
	// request's answer.
	f := func(v float64) *float64 { return &v }
	base := Request{Tenant: "acme", UserID: "u-42", SessionID: "s-7", Messages: keyMsgs}
	tests := []struct {
		name   string
		change func(r *Request)
	}{
		{"scenario", func(r *Request) { r.Scenario = "medical" }},
		{"model", func(r *Request) { r.Model = "qwen-14b" }},
		{"max_tokens", func(r *Request) { r.MaxTokens = 256 }},
		{"temperature", func(r *Request) { r.Temperature = f(0.2) }},
		{"temperature zero", func(r *Request) { r.Temperature = f(0) }},
		{"deadline_ms", func(r *Request) { r.DeadlineMS = 30000 }},
		{"tools", func(r *Request) { r.Tools = []Tool{{Type: "function", Function: FunctionTool{Name: "lookup"}}} }},
		{"seed", func(r *Request) { s := int64(7); r.Seed = &s }},
		{"top_p", func(r *Request) { r.TopP = f(0.5) }},
		{"reasoning_effort", func(r *Request) { r.ReasoningEffort = "low" }},
		{"no_store", func(r *Request) { r.NoStore = true }}, // not the answer, but whether it is kept
	}
	seen := map[string]string{KeyFor(base): "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			tt.change(&r)
			k := KeyFor(r)
			if prev, dup := seen[k]; dup {
				t.Errorf("changing %s gives the same key as %s: %s", tt.name, prev, k)
			}
			seen[k] = tt.name
			if KeyFor(r) != (IDs{}).Fingerprint(r) {
				t.Errorf("the derived key and the fingerprint differ")
			}
		})
	}
	t.Run("stream and the caller key are not part of it", func(t *testing.T) {
		r := base
		r.Stream = true
		if KeyFor(r) != KeyFor(base) {
			t.Error("a streamed request gets another key than the same request unstreamed")
		}
		r.IdempotencyKey = "k1"
		if (IDs{}).Fingerprint(r) != KeyFor(base) {
			t.Error("the fingerprint depends on the caller's key")
		}
	})
	t.Run("golden", func(t *testing.T) {
		// Python: "llm-" + sha256(json.dumps(["acme","u-42","s-7",msgs,
		//   {"scenario":"medical","model":"qwen-14b","max_tokens":256,
		//    "temperature":0.2,"deadline_ms":30000}], ensure_ascii=False,
		//   separators=(",",":")).encode()).hexdigest()
		r := base
		r.Scenario, r.Model, r.MaxTokens, r.Temperature, r.DeadlineMS = "medical", "qwen-14b", 256, f(0.2), 30000
		const want = "llm-0767ffa0ae4de2e56b9cb06deeca26eb35595cbe0c2727270ceb8d9443380b49"
		if got := KeyFor(r); got != want {
			t.Errorf("KeyFor = %s, want %s", got, want)
		}
	})
}

func TestIDsWithSecret(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	ids, err := NewIDs(secret)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewIDs([]byte("another secret of at least 32 bytes!"))
	if err != nil {
		t.Fatal(err)
	}
	r := Request{UserID: "u-42", SessionID: "s-7", Messages: keyMsgs}
	tests := []struct {
		name       string
		got, plain string
		want       string // computed independently, in Python's hmac module
	}{
		{"derived", ids.For(r), KeyFor(r),
			"llm-a92ba8cfc7c03cf7eadc34650e98a24c2884756f60004ef5e40f04c0ee25cbcd"},
		{"scoped", ids.Scoped("acme", "order-123"), ScopedKey("acme", "order-123"),
			"llm-7563ceb23fc1ecba8113eac1d4368a321ded2c9651d0db94cadf0bd9e76707a5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %s, want HMAC-SHA-256 %s", tt.got, tt.want)
			}
			if tt.got == tt.plain {
				t.Error("the keyed ID equals the plain SHA-256 one: anyone can confirm a guessed prompt")
			}
			if err := ValidateKey(tt.got); err != nil {
				t.Errorf("ValidateKey = %v", err)
			}
		})
	}
	if ids.For(r) == other.For(r) {
		t.Error("two deployment secrets give the same ID")
	}
	for _, s := range []string{ids.String(), fmt.Sprintf("%v %+v %#v", ids, ids, ids)} {
		if strings.Contains(s, string(secret)) || strings.Contains(s, "48 49 50") {
			t.Errorf("the secret shows in %q", s)
		}
	}
}

func TestIDsFromEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvIDSecret {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name, value string
		keyed       bool
		wantErr     string
	}{
		{"unset: local development", "", false, ""},
		{"long enough", strings.Repeat("s", MinIDSecretLen), true, ""},
		{"too short", "hunter2", false, "LLM_ID_SECRET: the workflow ID secret has 7 bytes, fewer than the 32 required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids, err := IDsFromEnv(env(tt.value))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), tt.value) {
					t.Errorf("the error shows the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ids.Keyed() != tt.keyed {
				t.Errorf("Keyed = %v, want %v", ids.Keyed(), tt.keyed)
			}
		})
	}
}
