package keyword

import "testing"

func TestKeywordIn(t *testing.T) {
	tests := []struct {
		text, kw string
		want     bool
	}{
		{"chest pain", "chest pain", true},
		{"my chest pains", "chest pain", true},
		{"spain", "pain", false},
		{"spain and pain", "pain", true},
		{"(pain)", "pain", true},
		{"胸口pain", "pain", true},
		{"伤口出血了", "出血", true},
		{"出", "出血", false},
		{"anything", "", false},
		{"", "x", false},
		{"x2fa", "2fa", false},
		{"use 2fa", "2fa", true},
	}
	for _, tt := range tests {
		t.Run(tt.text+"/"+tt.kw, func(t *testing.T) {
			if got := In(tt.text, tt.kw); got != tt.want {
				t.Errorf("In(%q, %q) = %v, want %v", tt.text, tt.kw, got, tt.want)
			}
		})
	}
}

func TestMatchFold(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  Chest\t\n PAIN  ", "chest pain"},
		{"ＦＵＬＬ　ＷＩＤＴＨ１２３！", "full width123!"},
		{"Ünïcode", "ünïcode"},
		{"中文 不变", "中文 不变"},
		{"I can’t breathe", "i can't breathe"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Fold(tt.in); got != tt.want {
				t.Errorf("matchFold(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
