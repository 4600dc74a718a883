package route

import (
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/probegate/probegate/probe"
)

func TestLoRAScore(t *testing.T) {
	now := time.Unix(1000, 0)
	h := func(s string) uint64 { return xxhash.Sum64String(s) }
	sql := h("sql-lora")
	cases := []struct {
		name    string
		model   uint64
		adapter bool
		view    probe.View
		sent    []string // dispatched to this backend, oldest first, 1s apart ending 1s ago
		want    float64
	}{
		{"no model: neutral", 0, false, probe.View{MaxLoRA: 2}, nil, 0.5},
		{"base model, nothing known: neutral", h("base"), false, probe.View{MaxLoRA: 2, BaseModel: "base"}, nil, 0.5},
		{"base model sent here recently", h("base"), false, probe.View{MaxLoRA: 2, BaseModel: "base"}, []string{"base"}, 1},
		{"adapter reported running", sql, true, probe.View{MaxLoRA: 2, RunningLoRAs: []string{"sql-lora"}}, nil, 1},
		{"adapter reported waiting", sql, true, probe.View{MaxLoRA: 2, WaitingLoRAs: []string{"sql-lora"}}, nil, 1},
		{"adapter sent here recently (idle, invisible to reports)", sql, true, probe.View{MaxLoRA: 1}, []string{"sql-lora"}, 1},
		{"adapter sent here, then max_lora others: likely evicted, slots full", sql, true, probe.View{MaxLoRA: 1, BaseModel: "base"}, []string{"sql-lora", "chat-lora"}, 0},
		{"base-model traffic does not take adapter slots", sql, true, probe.View{MaxLoRA: 1, BaseModel: "base"}, []string{"sql-lora", "base"}, 1},
		{"slots full per report", sql, true, probe.View{MaxLoRA: 2, RunningLoRAs: []string{"a", "b"}}, nil, 0},
		{"free slot", sql, true, probe.View{MaxLoRA: 2, RunningLoRAs: []string{"a"}}, nil, 0.5},
		{"no LoRA report: neutral", sql, true, probe.View{}, nil, 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mem loraMemory
			for i, m := range c.sent {
				mem.Note(h(m), now.Add(-time.Duration(len(c.sent)-i)*time.Second))
			}
			if got := loraScore(c.model, c.adapter, &c.view, &mem, now, loraWindow); got != c.want {
				t.Fatalf("loraScore = %v, want %v", got, c.want)
			}
		})
	}
}

func TestLoRAMemoryForgetsAfterWindow(t *testing.T) {
	var mem loraMemory
	now := time.Unix(1000, 0)
	mem.Note(42, now)
	if _, ok := mem.Last(42, now.Add(loraWindow), loraWindow); !ok {
		t.Fatal("forgot within the window")
	}
	if _, ok := mem.Last(42, now.Add(loraWindow+time.Nanosecond), loraWindow); ok {
		t.Fatal("remembered past the window")
	}
	if _, ok := mem.Last(0, now, loraWindow); ok {
		t.Fatal("hash 0 is never recorded")
	}
}
