package probe

import (
	"errors"
	"testing"
)

func TestParseLoadJSON(t *testing.T) {
	tests := []struct {
		name string
		body string
		want int
		err  error
	}{
		{"plain", `{"server_load": 7}`, 7, nil},
		{"zero", `{"server_load":0}`, 0, nil},
		{"float rounds", `{"server_load": 3.0, "other": [1,2]}`, 3, nil},
		{"unknown fields first", `{"x":{"y":1},"server_load":42}`, 42, nil},
		{"missing", `{"load": 1}`, 0, ErrNoLoad},
		{"negative", `{"server_load": -1}`, 0, ErrSyntax},
		{"string", `{"server_load": "5"}`, 0, ErrSyntax},
		{"huge", `{"server_load": 1e300}`, 0, ErrSyntax},
		{"not json", `server_load=5`, 0, ErrSyntax},
		{"empty", ``, 0, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseLoadJSON([]byte(tt.body), t0)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.ServerLoad != tt.want || l.Queue() != tt.want || l.Running != -1 || l.KVUse != -1 || !l.At.Equal(t0) {
				t.Errorf("got %+v", l)
			}
		})
	}
	if _, err := ParseLoadJSON(make([]byte, MaxLoadBytes+1), t0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized body: err = %v", err)
	}
}

// FuzzParseLoadJSON: never panics; success means a non-negative ServerLoad
// and nothing else known.
func FuzzParseLoadJSON(f *testing.F) {
	for _, s := range []string{`{"server_load": 7}`, `{"server_load":1.5e3}`, `{"server_load":-0}`, `[]`, `{"server_load":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		l, err := ParseLoadJSON(body, t0)
		if err != nil {
			return
		}
		if l.ServerLoad < 0 || l.Running != -1 || l.Waiting != -1 || l.KVUse != -1 {
			t.Fatalf("bad load %+v", l)
		}
	})
}

func BenchmarkParseLoadJSON(b *testing.B) {
	body := []byte(`{"server_load": 12}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseLoadJSON(body, t0); err != nil {
			b.Fatal(err)
		}
	}
}
