package probe

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// ViewInto writes View's every field over a used View, and BriefInto
// writes the View's load fields (over whatever the Brief held) at the same instant, whatever the
// report (none, KV-only, waiting-only, /load, full), its age (the stale
// boundary to the nanosecond, in the future, ancient), the counters and
// the token work, and whether the clocks carry a monotonic reading.
func TestBriefEqualsView(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const stale = 2 * time.Second
	for i := range 4000 {
		var now time.Time
		if i%2 == 0 {
			now = time.Now() // monotonic reading
		} else {
			now = time.Unix(1_800_000_000, int64(r.IntN(1e9)))
		}
		s := NewState("b:1")
		for range r.IntN(5) {
			s.Dispatch()
		}
		ages := []time.Duration{0, stale - 1, stale, stale + 1, -time.Second, time.Duration(r.Int64N(int64(3 * stale))), 200 * 365 * 24 * time.Hour}
		if r.IntN(6) > 0 {
			l := Load{Running: r.IntN(5) - 1, Waiting: r.IntN(4) - 1, KVUse: r.Float64()*1.2 - 0.2, ServerLoad: r.IntN(4) - 1, At: now.Add(-ages[r.IntN(len(ages))]), Source: Source(1 + r.IntN(3))}
			if r.IntN(3) == 0 {
				l.At = l.At.Round(0) // no monotonic reading
			}
			s.Report(&l)
		}
		for range r.IntN(4) {
			s.Dispatch()
		}
		for range r.IntN(4) {
			s.Finish()
		}
		if r.IntN(2) == 0 {
			s.AddWork(int64(r.IntN(3000)), int64(r.IntN(100)))
			s.PrefillDone(int64(r.IntN(1000)), time.Duration(1+r.IntN(1000))*time.Millisecond, float64(256+r.IntN(2000)))
		}
		if r.IntN(2) == 0 { // a learned decode speed
			s.DecodeSample(now.Add(-2*time.Second), 64, now.Add(-time.Second))
		}
		for range r.IntN(4) { // requests holding seat time, some decoding
			tok := int64(r.IntN(500))
			h := s.HoldSeat(tok, s.DecodeNs())
			if r.IntN(3) > 0 {
				s.StartDecode(h, tok, s.DecodeNs(), now.Add(-time.Duration(r.IntN(1000))*time.Millisecond))
			}
		}
		v := s.View(now, stale)
		into := garbageView()
		s.ViewInto(&into, now, stale)
		if !reflect.DeepEqual(into, v) {
			t.Fatalf("case %d: ViewInto over a used View %+v, View %+v", i, into, v)
		}
		got := Brief{Queue: -7, KVUse: 9, Waiting: 9, Source: SourceProbe, PrefillTokens: 1, DecodeTokens: 1, PrefillRequests: 1, NsPerToken: 1, ForeignShare: 0.5, Seats: 9, SeatLimit: 9}
		s.BriefInto(&got, now.Add(-stale))
		want := v.Brief()
		if got != want {
			t.Fatalf("case %d: Brief %+v, View's %+v (view %+v)", i, got, want, v)
		}
	}
}

// garbageView returns a View whose every field is set to a value no view
// of these tests has, so that a field ViewInto leaves unwritten shows.
func garbageView() View {
	var v View
	rv := reflect.ValueOf(&v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64, reflect.Uint8, reflect.Uint64:
			if f.CanInt() {
				f.SetInt(77)
			} else {
				f.SetUint(77)
			}
		case reflect.Float64:
			f.SetFloat(77.5)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("garbage")
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"garbage"}))
		default:
			panic("garbageView: field " + rv.Type().Field(i).Name + " of an unhandled kind")
		}
	}
	return v
}
