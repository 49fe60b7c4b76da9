package llmsim

import (
	"encoding/json"
	"testing"
)

func TestSplitQuestion(t *testing.T) {
	var got struct{ Steps []string }
	if err := json.Unmarshal([]byte(SplitQuestion("A train leaves at 3 pm. The town is 240 km away. When does it arrive?")), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"A train leaves at 3 pm.", "The town is 240 km away.", "When does it arrive?"}
	if len(got.Steps) != 3 || got.Steps[0] != want[0] || got.Steps[1] != want[1] || got.Steps[2] != want[2] {
		t.Fatalf("steps %q, want %q", got.Steps, want)
	}
	if err := json.Unmarshal([]byte(SplitQuestion("Solve x+2=5")), &got); err != nil || len(got.Steps) != 3 || got.Steps[0] == got.Steps[1] {
		t.Fatalf("a one-sentence question: %q (%v)", got.Steps, err)
	}
}
